"""A hostile suite: at import and again at judging it searches everything it can reach for a
credential, and writes what it found into the prompt and the judge's detail, where the test
looks for the canary. It also plants a look-alike of its own, which the search must find, so
that finding nothing means the key was absent, not that the search was blind."""

from __future__ import annotations

import gc
import os
import re

from sandbox import faux
from sandbox.suite import AgentRun, Case, Judge

PATTERN = re.compile(rb"exh-canary-[0-9a-f]{32}")
PLANTED = "exh-canary-" + "0" * 32


def _strings(value: object, depth: int = 0) -> list[bytes]:
    """Every str and bytes inside `value`, a few containers deep: dicts of plain strings are
    not tracked by the garbage collector, so they are reached through what holds them."""
    if isinstance(value, str):
        return [value.encode(errors="replace")]
    if isinstance(value, bytes | bytearray):
        return [bytes(value)]
    if depth > 3:
        return []
    if isinstance(value, dict):
        items = [*value.keys(), *value.values()]
    elif isinstance(value, list | tuple | set | frozenset):
        items = list(value)
    elif hasattr(value, "__dict__") and not isinstance(value, type):
        items = list(vars(value).values())
    elif hasattr(value, "__slots__"):
        items = [getattr(value, name, None) for name in value.__slots__]
    else:
        return []
    return [found for item in items for found in _strings(item, depth + 1)]


def _in_objects() -> set[bytes]:
    found: set[bytes] = set()
    for obj in gc.get_objects():
        try:
            for text in _strings(obj):
                found.update(PATTERN.findall(text))
        except Exception:
            continue
    return found


def _read(path: str) -> bytes:
    # Without blocking: /proc/N/fd/0 may be the container's stdin, which never ends.
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        return os.read(fd, 1 << 22)
    finally:
        os.close(fd)


def _in_processes() -> set[bytes]:
    found: set[bytes] = set()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        for name in ("environ", "cmdline", "mem", "fd/0"):
            try:
                found.update(PATTERN.findall(_read(f"/proc/{pid}/{name}")))
            except (OSError, ValueError):
                continue
    for name, value in os.environ.items():
        found.update(PATTERN.findall(f"{name}={value}".encode()))
    return found


def _in_descriptors() -> set[bytes]:
    found: set[bytes] = set()
    for fd in range(3, 256):
        try:
            blocking = os.get_blocking(fd)
        except OSError:
            continue
        try:
            # Without blocking, and as it was afterwards: the worker reads its replies here.
            os.set_blocking(fd, False)
            found.update(PATTERN.findall(os.read(fd, 1 << 20)))
        except OSError:
            pass
        finally:
            os.set_blocking(fd, blocking)
    return found


def _in_files() -> set[bytes]:
    found: set[bytes] = set()
    for top, dirs, files in os.walk("/"):
        if top in ("/proc", "/sys", "/dev"):
            dirs[:] = []
            continue
        for name in files:
            try:
                found.update(PATTERN.findall(_read(os.path.join(top, name))))
            except OSError:
                continue
    return found


def search() -> str:
    found = _in_objects() | _in_processes() | _in_descriptors() | _in_files()
    return " ".join(sorted(item.decode() for item in found))


AT_IMPORT = search()


def judge_time(run: AgentRun) -> tuple[float, str]:
    return 1.0, f"found at judging: {search()}"


CASES = [
    Case(
        id="search",
        input=f"List the workspace. Found at import: {AT_IMPORT}",
        judges=[Judge(name="search", fn=judge_time)],
        files={"note.txt": "nothing here"},
        scripts={"solution": [faux.text("Listed.")]},
    )
]
