"""A task's verifier, Harbor's contract: after the agent, `tests/test.sh` as root, a reward.

The root supervisor runs this once the sandboxed worker has reported the agent's run. By
then nothing of the agent may still run (every other process is killed first), and only
then do the tests appear in /tests: the agent never sees them, nor the reference solution.
The script runs in the task's working directory, with the verifier's timeout, and leaves its
reward in /logs/verifier/reward.json or reward.txt.

It runs as Harbor's does (docs/security/verifier.md): uid 0 with Docker's default
capabilities less CAP_MKNOD, on the container's writable root, with the image's environment,
root's home, and the working directory on every Python's sys.path after the standard
library and the installed packages (sandbox/verifier_site/sitecustomize.py), so `python3 -m
PACKAGE` of the agent's code works while nothing of the agent's shadows a module the tests
use. A task may ask for the strict verifier instead: no capability at all, and nothing of
the working directory on sys.path.

The agent's files are what the script reads and often runs (a test that imports the agent's
module), so everything that happens here is within the agent's reach: no reward, a crash, a
hang, a malformed or oversized reward file are all `NoReward`, a failed run, never an
unscored one.
"""

from __future__ import annotations

import base64
import contextlib
import json
import math
import os
import shutil
import signal
import stat
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from sandbox.credentials import is_secret_name
from sandbox.workspace import FixtureError, fixture_target

TESTS_DIR = Path("/tests")
SOLUTION_DIR = Path("/solution")
LOGS_DIR = Path("/logs")
VERIFIER_LOGS = LOGS_DIR / "verifier"
TEST_SCRIPT = TESTS_DIR / "test.sh"
LOG_NAME = "test-stdout.txt"
LOG_LIMIT = 1024 * 1024
REWARD_LIMIT = 64 * 1024
# How long the killing of the agent's (or the verifier's) leftovers may take.
CLEAR_TIMEOUT_S = 10.0
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# Every Python the verifier's script starts, as root, puts its working directory (the
# agent's) nowhere before the standard library, nor a user site directory on sys.path: its
# usercustomize would be looked for along the whole path, the working directory included.
# DEFAULT_PATH has no agent's command: an installed agent's is on the agent's PATH only
# (sandbox/external.py, AGENT_BIN).
VERIFIER_PYTHON_ENV = {"PYTHONSAFEPATH": "1", "PYTHONNOUSERSITE": "1"}
# The faithful verifier's: sitecustomize.py there appends the working directory to sys.path
# (and then loads the image's own sitecustomize, if any).
VERIFIER_SITE = "/opt/examhall/sandbox/verifier_site"
WORKDIR_VARIABLE = "EXAMHALL_VERIFIER_WORKDIR"
# Docker's default capabilities less CAP_MKNOD, by number. The container holds CAP_MKNOD
# (service/backends/docker/hardening.py): a process whose capabilities are not a superset of
# another's cannot ptrace-access it, so the verifier (and the agent's code it runs) cannot
# reach the descriptors of the container's init, whose stdout is the channel.
VERIFIER_CAPS = frozenset({0, 1, 3, 4, 5, 6, 7, 8, 10, 13, 18, 29, 31})
# Runs the command as uid 0 with VERIFIER_CAPS, or none. -I -S: no environment variable, no
# user or site directory and no .pth file reaches this Python, which starts as root with the
# supervisor's capabilities; an image's site-packages may name the agent's workspace. The
# command's own environment travels as an argument and applies only at its exec.
_CAPLESS = (
    "import sys; sys.path.insert(0, '/opt/examhall'); from sandbox.capless import main; main()"
)
# Root's home for the strict verifier: Harbor's tests install tools and caches under $HOME.
VERIFIER_HOME = Path("/tmp/examhall-verifier-home")
ROOT_HOME = Path("/root")
# Where the agent's processes could leave files at paths root's tools read by convention.
AGENT_TEMP_DIRS = (Path("/tmp"), Path("/var/tmp"))


class NoReward(Exception):
    """The verifier left no usable reward; the message says why."""


@dataclass(frozen=True)
class Verdict:
    # The reward as examhall scores it: within [0, 1], passed at 1.
    score: float
    reward: dict[str, float]
    detail: str
    log: bytes


def end_other_processes(timeout_s: float = CLEAR_TIMEOUT_S) -> None:
    """SIGKILL every process in the container but this one and init, until none is left.

    As root with CAP_KILL, kill(-1) reaches every process but the caller and init, however
    it detached itself; one round may miss a process forked meanwhile, so it repeats."""
    deadline = time.monotonic() + timeout_s
    while True:
        with contextlib.suppress(ProcessLookupError):
            os.kill(-1, signal.SIGKILL)
        _reap_children()
        if not _live_others():
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"processes {_live_others()} outlived SIGKILL for {timeout_s} s")
        time.sleep(0.005)


def _reap_children() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _live_others() -> list[int]:
    me = os.getpid()
    live = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) in (1, me):
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as handle:
                state = handle.read().rpartition(b")")[2].split()[0]
        except (OSError, IndexError):
            continue  # gone meanwhile
        if state not in (b"Z", b"X"):  # a zombie is dead; init reaps it
            live.append(int(name))
    return live


def replace_tree(root: Path, files: dict[str, str], mode: int = 0o755) -> None:
    """Replace what `root` holds with the base64-encoded `files`, root-owned."""
    for entry in root.iterdir():
        _remove(entry)
    for name, encoded in files.items():
        target = fixture_target(root, name)
        target.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, mode)
        with os.fdopen(fd, "wb") as handle:
            handle.write(base64.b64decode(encoded))
        os.chmod(target, mode)


def remove_not_roots(directory: Path) -> None:
    """Remove every entry of `directory` that root does not own (links themselves)."""
    for entry in directory.iterdir():
        if entry.lstat().st_uid != 0:
            _remove(entry)


def _remove(entry: Path) -> None:
    """A file, a link (never what it names) or a directory with all it holds."""
    if entry.is_dir() and not entry.is_symlink():
        shutil.rmtree(entry)
    else:
        entry.unlink()


def place_solution(files: dict[str, str]) -> None:
    """The reference solution in /solution, readable by the (oracle) agent."""
    os.chmod(SOLUTION_DIR, 0o755)
    replace_tree(SOLUTION_DIR, files, 0o755)


def hand_to_root(workspace: Path) -> None:
    """Give the agent's files to root, as Harbor's tests expect to write beside them. Links
    are changed themselves, never followed: the agent made them. The directory itself is
    open to every user, as a WORKDIR the image made is, for a test that runs the agent's
    code as another user."""
    for directory, dirnames, filenames in os.walk(workspace):
        for name in [*dirnames, *filenames]:
            os.lchown(os.path.join(directory, name), 0, 0)
    os.lchown(workspace, 0, 0)
    os.chmod(workspace, 0o755)


def lay_out_logs(uid: int, gid: int) -> None:
    """/logs/agent, the agent's to write, and /logs/verifier, root's, as Harbor lays them out."""
    os.chmod(LOGS_DIR, 0o755)
    agent = LOGS_DIR / "agent"
    agent.mkdir(mode=0o755, exist_ok=True)
    os.chown(agent, uid, gid)
    VERIFIER_LOGS.mkdir(mode=0o755, exist_ok=True)


def describe(strict: bool) -> str:
    """Which verifier a trial ran under, for its transcript (and check-tasks' causes)."""
    if strict:
        return "the strict verifier: tests/test.sh as uid 0 holding no capability"
    return (
        "the verifier as Harbor's: tests/test.sh as uid 0 with Docker's default capabilities "
        "less MKNOD, on a writable root"
    )


def environment(env: dict[str, str], *, cwd: str, home: Path, strict: bool) -> dict[str, str]:
    """The script's whole environment. The faithful verifier's starts from the image's own
    (its ENV, as `docker exec` gives it); the strict one's from nothing."""
    if strict:
        base = {"PATH": DEFAULT_PATH, "HOME": str(home), "LANG": "C.UTF-8"}
        return {**base, **env, **VERIFIER_PYTHON_ENV}
    image = {k: v for k, v in os.environ.items() if not is_secret_name(k)}
    base = {"PATH": DEFAULT_PATH, "LANG": "C.UTF-8", **image, "HOME": str(home)}
    merged = {**base, **env}
    theirs = merged.get("PYTHONPATH")
    # Last, so no task's env can undo them: the working directory joins sys.path at its end
    # (sitecustomize.py), never at its start.
    return {
        **merged,
        **VERIFIER_PYTHON_ENV,
        "PYTHONPATH": VERIFIER_SITE + (f":{theirs}" if theirs else ""),
        WORKDIR_VARIABLE: cwd,
    }


def run(
    tests: dict[str, str],
    *,
    timeout_s: float,
    env: dict[str, str],
    cwd: str,
    workspace: Path,
    strict: bool = False,
) -> Verdict:
    """Run the verifier and read its reward, or raise NoReward."""
    end_other_processes()
    os.chmod(TESTS_DIR, 0o755)
    # /logs/verifier is root's (the agent could not write in /logs) and starts empty;
    # /logs/agent stays as the agent left it, for the tests to read as Harbor's do.
    os.chmod(LOGS_DIR, 0o755)
    VERIFIER_LOGS.mkdir(mode=0o755, exist_ok=True)
    replace_tree(VERIFIER_LOGS, {})
    # What the agent left in /tmp and /var/tmp (configs, caches at predictable paths) would
    # be read by root's tools: only the workspace and /logs/agent are the agent's to leave
    # behind. What the image keeps there is root's, and stays.
    for temp in AGENT_TEMP_DIRS:
        if temp.is_dir() and not temp.is_symlink():
            remove_not_roots(temp)
    home = VERIFIER_HOME if strict or not ROOT_HOME.is_dir() else ROOT_HOME
    home.mkdir(mode=0o700, exist_ok=True)
    try:
        replace_tree(TESTS_DIR, tests)
    except FixtureError as exc:
        raise NoReward(f"The task's tests could not be placed: {exc}") from None
    if not TEST_SCRIPT.is_file():
        raise NoReward("The task has no tests/test.sh.")
    hand_to_root(workspace)
    log_fd = os.open(VERIFIER_LOGS / LOG_NAME, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    started = time.monotonic()
    try:
        command_env = environment(env, cwd=cwd, home=home, strict=strict)
        keep = "" if strict else ",".join(map(str, sorted(VERIFIER_CAPS)))
        process = subprocess.Popen(
            [
                sys.executable,
                "-I",
                "-S",
                "-c",
                _CAPLESS,
                json.dumps(command_env),
                keep,
                "/bin/bash",
                str(TEST_SCRIPT),
            ],
            stdin=subprocess.DEVNULL,
            stdout=log_fd,
            stderr=log_fd,
            env={"PATH": DEFAULT_PATH},
            cwd=cwd if os.path.isdir(cwd) else str(workspace),
            start_new_session=True,
            close_fds=True,
        )
    finally:
        os.close(log_fd)
    try:
        code = process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        code = None
    finally:
        end_other_processes()  # the script's own leftovers, and its group on a timeout
        process.wait()
    log = read_log() or b""
    if code is None:
        raise NoReward(f"The verifier ran past its {timeout_s:g} s timeout.")
    reward = read_reward()
    score = reward["reward"] if "reward" in reward else sum(reward.values()) / len(reward)
    # reward.txt's one number is `reward` itself: shown as the number, not `reward=...`.
    shown = (
        f"{reward['reward']:g}"
        if list(reward) == ["reward"]
        else ", ".join(f"{k}={v:g}" for k, v in reward.items())
    )
    took = time.monotonic() - started
    how = "strict verifier" if strict else "verifier"
    detail = f"reward {shown} ({how}: test.sh exited {code} after {took:.1f} s)"
    return Verdict(score=min(1.0, max(0.0, score)), reward=reward, detail=detail, log=log)


def read_log() -> bytes | None:
    return _read_capped(LOG_NAME, LOG_LIMIT)


def read_reward() -> dict[str, float]:
    """Harbor's reward files: reward.json (a number, or names to numbers) first, else
    reward.txt (one number). The content is never echoed: the files may be links the
    agent's code made to what only root reads."""
    for name in ("reward.json", "reward.txt"):
        data = _read_capped(name, REWARD_LIMIT)
        if data is None:
            continue
        if not data.strip():
            raise NoReward(f"/logs/verifier/{name} is empty.")
        try:
            value = json.loads(data) if name.endswith(".json") else float(data.decode().strip())
        except (ValueError, UnicodeDecodeError, RecursionError):
            raise NoReward(f"/logs/verifier/{name} does not hold a number.") from None
        reward = value if isinstance(value, dict) else {"reward": value}
        if not reward or not all(_finite_number(v) for v in reward.values()):
            raise NoReward(f"/logs/verifier/{name} holds a value that is not a finite number.")
        return {str(k): float(v) for k, v in reward.items()}
    raise NoReward("The verifier wrote no /logs/verifier/reward.txt or reward.json.")


def _finite_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _read_capped(name: str, limit: int) -> bytes | None:
    """A regular file's content in /logs/verifier, None when absent; NoReward for a link, a
    special file or one over `limit` bytes. The directory is opened without following a
    link too: the script, as uid 0, could have put one in its place."""
    try:
        directory = os.open(VERIFIER_LOGS, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError as exc:
        raise NoReward(f"{VERIFIER_LOGS} is no longer a directory ({exc.strerror}).") from None
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=directory)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise NoReward(f"{VERIFIER_LOGS}/{name} cannot be read ({exc.strerror}).") from None
    finally:
        os.close(directory)
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise NoReward(f"{VERIFIER_LOGS}/{name} is not a regular file.")
        data = handle.read(limit + 1)
    if len(data) > limit:
        if name == LOG_NAME:
            return data[:limit] + b"\n[examhall: log cut at 1 MiB]\n"
        raise NoReward(f"{VERIFIER_LOGS}/{name} is larger than {limit} bytes.")
    return data
