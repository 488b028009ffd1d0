"""The opt-in `bash` tool, and `kill_strays` to stop whatever the agent left running.

A command runs in its own session (no controlling terminal, its own process group), with
only the scrubbed tool environment, stdin from /dev/null and stdout and stderr merged into
one pipe. On timeout the whole process group is killed, not just the shell.
"""

from __future__ import annotations

import codecs
import contextlib
import os
import signal
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from sandbox.tools.base import Tool, ToolContext, ToolError, optional_number, required_str

if TYPE_CHECKING:
    import subprocess

# The shell first volunteers to be the kernel's first OOM victim, and everything the
# command starts inherits that, so a memory hog dies before the worker does. Raising
# one's own score needs no privilege; the braces make 2>/dev/null also hide the error of
# the redirection itself should /proc be unwritable.
_LAUNCHER = '{ echo 1000 > /proc/self/oom_score_adj; } 2>/dev/null; exec /bin/bash -c "$1"'

# How often to check whether the shell has exited while its pipe stays open (held by a
# background child); normally the end of output wakes us at once.
_POLL_S = 0.05
_READ_CHUNK = 65536
# Bounds one burst of reading, so a fast writer cannot keep us from the deadline check.
_MAX_READS_PER_WAKE = 64
# How long to keep killing a process group that keeps forking before giving up on it.
_KILL_PATIENCE_S = 2.0


class _Capture:
    """The first `limit` bytes of the output, and how many there were in all."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.kept = bytearray()
        self.total = 0

    def feed(self, chunk: bytes) -> None:
        room = self.limit - len(self.kept)
        if room > 0:
            self.kept += chunk[:room]
        self.total += len(chunk)

    def text(self) -> str:
        truncated = self.total > len(self.kept)
        # When cut off, a character split at the cut is dropped rather than shown as junk.
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        text = decoder.decode(bytes(self.kept), final=not truncated)
        if truncated:
            text += (
                f"\n[output truncated: {self.total - len(self.kept)} of {self.total} bytes "
                "not shown; redirect output to a file and read parts of it instead]"
            )
        return text


def _read_available(fd: int, capture: _Capture) -> bool:
    """Read what the pipe holds now, without blocking; True at end of output."""
    for _ in range(_MAX_READS_PER_WAKE):
        try:
            chunk = os.read(fd, _READ_CHUNK)
        except BlockingIOError:
            return False
        if not chunk:
            return True
        capture.feed(chunk)
    return False


def _group_has_live_members(pgid: int) -> bool:
    """Whether a process of group `pgid` is still running. Zombies do not count: killed
    orphans stay zombies until init gets round to reaping them, but they run no code.
    (killpg(pgid, 0) cannot tell: it succeeds for zombies too.)"""
    try:
        pids = [name for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return True  # cannot look; let killpg decide
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", "rb") as stat_file:
                stat_line = stat_file.read()
        except OSError:
            continue  # exited meanwhile
        # The command name may contain spaces and parentheses; the fields after the last
        # ')' are: state, ppid, pgrp, ...
        fields = stat_line.rsplit(b")", 1)[-1].split()
        if len(fields) >= 3 and int(fields[2]) == pgid and fields[0] not in (b"Z", b"X"):
            return True
    return False


def _reap_group(pgid: int) -> None:
    """Reap our own dead children in group `pgid`. When the worker is PID 1 or a
    subreaper, orphaned members were re-parented to it and nobody else will."""
    while True:
        try:
            pid, _ = os.waitpid(-pgid, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    """SIGKILL the command's whole process group, again and again while members remain:
    a fork bomb can create new members between two kills."""
    import subprocess

    pgid = process.pid  # start_new_session made the shell its group's leader
    deadline = time.monotonic() + _KILL_PATIENCE_S
    delay = 0.001
    while True:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except ProcessLookupError:
            break
        if process.returncode is None:
            # A process stuck in the kernel (D state) may outlive this; kill the rest anyway.
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=max(0.0, deadline - time.monotonic()))
        _reap_group(pgid)
        if not _group_has_live_members(pgid) or time.monotonic() > deadline:
            break
        time.sleep(delay)
        delay = min(delay * 2, 0.05)


def _execute(command: str, ctx: ToolContext, timeout: float) -> tuple[int, _Capture, bool]:
    """Run the command; (exit status, captured output, whether it timed out)."""
    # Imported by the trials that run a command, not at every worker's start.
    import selectors
    import subprocess

    try:
        process = subprocess.Popen(
            ["/bin/sh", "-c", _LAUNCHER, "bash", command],
            cwd=ctx.workspace,
            env=dict(ctx.env),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            close_fds=True,
        )
    except OSError as exc:
        raise ToolError(f"Could not start the command: {exc}") from None

    capture = _Capture(ctx.output_limit)
    deadline = time.monotonic() + timeout
    timed_out = False
    assert process.stdout is not None
    fd = process.stdout.fileno()
    os.set_blocking(fd, False)
    try:
        with selectors.DefaultSelector() as selector:
            selector.register(fd, selectors.EVENT_READ)
            # Read while waiting: a child blocked on a full pipe would never exit.
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    timed_out = True
                    break
                if selector.select(min(remaining, _POLL_S)) and _read_available(fd, capture):
                    break  # end of output
                if process.poll() is not None:
                    # The shell is done but a background child holds the pipe open: take
                    # what is there and return rather than wait for that child.
                    _read_available(fd, capture)
                    break
        if not timed_out and process.returncode is None:
            try:
                # Output ended, but the shell may still run (it closed its stdout).
                process.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                timed_out = True
        if timed_out:
            _kill_group(process)
            _read_available(fd, capture)  # what was written before the kill
    finally:
        if process.returncode is None:  # interrupted by an exception: leave nothing behind
            _kill_group(process)
        process.stdout.close()
    return process.returncode, capture, timed_out


def _run_bash(args: Mapping[str, Any], ctx: ToolContext) -> str:
    command = required_str(args, "command")
    requested = optional_number(args, "timeout")
    timeout = ctx.timeout_s if requested is None else min(requested, ctx.timeout_s)

    status, capture, timed_out = _execute(command, ctx, timeout)
    output = capture.text()
    notes: list[str] = []
    if timed_out:
        notes.append(f"[command timed out after {timeout:g}s; its process group was killed]")
    elif status > 0:
        notes.append(f"[exit code {status}]")
    elif status < 0:
        try:
            name = signal.Signals(-status).name
        except ValueError:
            name = f"signal {-status}"
        notes.append(f"[killed by {name}]")
    if not notes:
        return output or "(no output)"
    if output and not output.endswith("\n"):
        output += "\n"
    result = output + "\n".join(notes)
    if timed_out:
        # An error, so the event records it; the model still sees the output.
        raise ToolError(result)
    return result


def kill_strays() -> None:
    """SIGKILL every process the calling user may signal, except the caller itself.

    The worker calls this after the agent has finished, as the sandbox user, so nothing
    the agent started (servers, `setsid` escapees, daemons outside any process group)
    keeps running while the judges look at the workspace. Linux's kill(-1) never signals
    the calling process.

    Call it only after dropping privileges: as root, kill(-1) would kill every process in
    the PID namespace. It refuses (RuntimeError) when the effective uid is 0. Note that it
    also kills other processes of the same user, so it must not run while any of them is
    still needed.
    """
    if os.geteuid() == 0:
        raise RuntimeError(
            "kill_strays() refused to run as root: kill(-1) would kill every process. "
            "Drop privileges to the sandbox user first."
        )
    with contextlib.suppress(ProcessLookupError):  # nothing else runs as this user
        os.kill(-1, signal.SIGKILL)


BASH = Tool(
    name="bash",
    description=(
        "Run a command with /bin/bash -c in the workspace directory and return its "
        "combined stdout and stderr (truncated past the output limit) and its exit code. "
        "There is no terminal and stdin is empty, so interactive programs will not work. "
        "A command that runs past the timeout is killed with everything it started. "
        "Background processes ('cmd &') must redirect their output "
        "('cmd > log 2>&1 &'); otherwise their output is lost once the command returns."
    ),
    parameters={
        "type": "object",
        "properties": {
            "command": {"type": "string", "description": "The bash command line to run."},
            "timeout": {
                "type": "number",
                "exclusiveMinimum": 0,
                "description": "Seconds before the command is killed; capped at the "
                "trial's tool timeout, which is also the default.",
            },
        },
        "required": ["command"],
        "additionalProperties": False,
    },
    run=_run_bash,
)
