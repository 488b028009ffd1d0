"""Proof, from a separate process of the sandbox user, that protected paths are unreadable.

The check runs in a child process rather than in the worker because a process may always
read its own /proc files and memory: only another process sees what a tool would see.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Mapping, Sequence

# Runs in the child: tries every path and reports each one that did not fail with
# EACCES or ENOENT, with what happened.
_PROBE = r"""
import errno, json, os, sys
leaks = []
for path in json.load(sys.stdin):
    try:
        if os.path.isdir(path):
            os.listdir(path)
        else:
            with open(path, "rb") as handle:
                handle.read(1)
        leaks.append([path, "readable"])
    except OSError as exc:
        if exc.errno not in (errno.EACCES, errno.ENOENT):
            leaks.append([path, f"unexpected error {errno.errorcode.get(exc.errno, exc.errno)}"])
print(json.dumps(leaks))
"""


class ReadableError(Exception):
    def __init__(self, path: str, how: str) -> None:
        super().__init__(f"The sandboxed agent can read case code: {path} ({how})")
        self.path = path


def verify_unreadable(paths: Sequence[str], env: Mapping[str, str]) -> None:
    """Raise ReadableError for the first path the sandbox user could read."""
    completed = subprocess.run(
        [sys.executable, "-I", "-c", _PROBE],
        input=json.dumps(list(paths)),
        capture_output=True,
        text=True,
        env=dict(env),
        timeout=30,
        check=False,
        cwd="/",
    )
    if completed.returncode != 0:
        raise RuntimeError(f"The self-check process failed: {completed.stderr.strip()[-500:]}")
    leaks = json.loads(completed.stdout)
    if leaks:
        path, how = leaks[0]
        raise ReadableError(path, how)
