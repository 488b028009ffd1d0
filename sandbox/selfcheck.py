"""Proof, from a separate process of the sandbox user, that protected paths are unreadable.

The check runs in a child process rather than in the worker because a process may always
read its own /proc files and memory: only another process sees what a tool would see.

The child is forked, not a second Python started: whether one process may read another's
/proc files and memory depends on the reader's ids and capabilities and on the target (its
ids, its dumpability), never on the reader's own dumpability, the one thing an exec would
reset. A forked child has the worker's ids and no capability, as every tool the worker
starts has, so it is refused exactly what a tool is refused; a second interpreter cost each
trial tens of milliseconds for nothing more.
"""

from __future__ import annotations

import errno
import json
import os
from collections.abc import Sequence
from typing import Any, NoReturn


class ReadableError(Exception):
    def __init__(self, path: str, how: str) -> None:
        super().__init__(f"The sandboxed agent can read case code: {path} ({how})")
        self.path = path


def verify_unreadable(paths: Sequence[str]) -> None:
    """Raise ReadableError for the first path the sandbox user could read."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        _probe_and_exit(paths, write_end)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        data = pipe.read()
    _, status = os.waitpid(pid, 0)
    try:
        report: dict[str, Any] = json.loads(data)
    except ValueError:
        report = {}
    if status != 0 or "leaks" not in report:
        detail = report.get("error") or f"wait status {status}"
        raise RuntimeError(f"The self-check process failed: {detail}")
    if report["leaks"]:
        path, how = report["leaks"][0]
        raise ReadableError(path, how)


def _probe_and_exit(paths: Sequence[str], fd: int) -> NoReturn:
    """The child: probe, report on `fd`, and end without running anything else."""
    code = 1
    try:
        try:
            line = json.dumps({"leaks": leaks(paths)})
        except BaseException as exc:
            line = json.dumps({"error": f"{type(exc).__name__}: {exc}"})
        else:
            code = 0
        _write_all(fd, line.encode())
    finally:
        os._exit(code)


def leaks(paths: Sequence[str]) -> list[tuple[str, str]]:
    """Every path that did not fail with EACCES or ENOENT, with what happened."""
    found = []
    for path in paths:
        try:
            if os.path.isdir(path):
                os.listdir(path)
            else:
                fd = os.open(path, os.O_RDONLY)
                try:
                    os.read(fd, 1)
                finally:
                    os.close(fd)
            found.append((path, "readable"))
        except OSError as exc:
            if exc.errno not in (errno.EACCES, errno.ENOENT):
                name = errno.errorcode.get(exc.errno, str(exc.errno)) if exc.errno else "?"
                found.append((path, f"unexpected error {name}"))
    return found


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
