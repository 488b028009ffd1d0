"""The root supervisor: it outlives the sandboxed worker, so an agent cannot erase a failure.

The agent's tools run as the same user as the sandboxed worker, so they can signal it: a
`kill -9 -1` would end the worker before it reports, and a trial with no result looks like
an infrastructure fault. So the worker forks before it drops privileges. The parent stays
root, which the agent's processes can neither signal, trace nor read, and only forwards the
child's messages to the control plane; when the child dies without a result, the parent
reports that death itself, and it builds the session artifact from the events it forwarded,
so the transcript survives too.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import traceback
from collections.abc import Callable
from typing import Any, BinaryIO

from sandbox import limits
from sandbox.channel import Channel
from sandbox.protocol import ErrorKind, ResultMessage, TrialResult

# Steps during which the agent's processes exist and may have ended the worker.
AGENT_STEPS = frozenset({"run_agent", "judge"})


def death_result(status: int, last_step: str | None) -> TrialResult:
    """What to report for a worker that ended without a result."""
    step = last_step or "start"
    if os.WIFSIGNALED(status):
        how = f"was killed by {signal.Signals(os.WTERMSIG(status)).name}"
    else:
        how = f"exited with code {os.waitstatus_to_exitcode(status)}"
    kind: ErrorKind
    if limits.snapshot().oom_kills:
        kind = "limit_exceeded"
        message = f"The worker {how} for memory during {step}: the trial passed its memory limit."
    elif os.WIFSIGNALED(status) and step in AGENT_STEPS:
        kind = "agent_error"
        message = (
            f"The worker {how} during {step} before reporting: the agent's processes ended it, "
            "which fails the trial."
        )
    else:
        kind = "sandbox_error"
        message = f"The worker {how} during {step} before reporting a result."
    return TrialResult(outcome="error", error_kind=kind, error_message=message, failed_step=step)


def _pump(source: BinaryIO, target_fd: int) -> None:
    """Copy the control plane's lines (model replies) to the child until either side ends."""
    try:
        with os.fdopen(target_fd, "wb", buffering=0) as target:
            for line in source:
                target.write(line)
    except OSError:
        pass  # the child is gone; nothing is waiting for these lines any more


def supervise(channel: Channel, run_child: Callable[[Channel], None]) -> None:
    """Run `run_child` in a forked process and relay its messages both ways; always end
    with one result and the session artifact."""
    read_fd, write_fd = os.pipe()
    child_in, parent_out = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: becomes the sandboxed worker
        code = 0
        try:
            os.close(read_fd)
            os.close(parent_out)
            channel.detach()
            run_child(Channel(write_fd, os.fdopen(child_in, "rb")))
        except BaseException:
            traceback.print_exc()
            code = 70
        finally:
            os._exit(code)
    os.close(write_fd)
    os.close(child_in)
    if channel.reader is not None:
        threading.Thread(
            target=_pump, args=(channel.reader, parent_out), name="examhall-pump", daemon=True
        ).start()
    else:
        os.close(parent_out)
    events: list[Any] = []
    last_step: str | None = None
    reported = False
    with os.fdopen(read_fd, "rb") as pipe:
        for line in pipe:
            if not line.endswith(b"\n"):
                break  # cut off mid-write by the child's death
            message = json.loads(line)
            kind = message.get("type")
            if kind == "step":
                last_step = message.get("step")
            elif kind == "event":
                events.append(message.get("event"))
            elif kind == "result":
                reported = True
            channel.send_line(line)
    _, status = os.waitpid(pid, 0)
    if not reported:
        channel.send(ResultMessage(result=death_result(status, last_step)))
    session = "".join(json.dumps(event) + "\n" for event in events)
    channel.artifact("session.jsonl", session.encode())
