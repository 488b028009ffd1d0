"""Noticing when the agent's processes hit a container limit, so the trial records it.

The limits themselves are enforced by the kernel (cgroups, tmpfs sizes); a fork bomb or a
memory hog is stopped, the agent sees an error and may go on. These counters let the trial
say which limit it ran into, rather than leave it to be guessed from tool output.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

PIDS_EVENTS = ("/sys/fs/cgroup/pids/pids.events", "/sys/fs/cgroup/pids.events")
MEMORY_EVENTS = ("/sys/fs/cgroup/memory/memory.oom_control", "/sys/fs/cgroup/memory.events")
FILESYSTEMS = ("/workspace", "/tmp")


def _counter(paths: tuple[str, ...], name: str) -> int:
    for path in paths:
        try:
            with open(path) as handle:
                for line in handle:
                    key, _, value = line.partition(" ")
                    if key == name:
                        return int(value)
        except (OSError, ValueError):
            continue
    return 0


def _full(path: str) -> bool:
    try:
        stats = os.statvfs(path)
    except OSError:
        return False
    return stats.f_bavail == 0


@dataclass(frozen=True)
class LimitSnapshot:
    """The cgroup's counts of refused forks and OOM kills at one moment."""

    pid_refusals: int
    oom_kills: int


def snapshot() -> LimitSnapshot:
    return LimitSnapshot(_counter(PIDS_EVENTS, "max"), _counter(MEMORY_EVENTS, "oom_kill"))


def hits_since(before: LimitSnapshot) -> list[str]:
    """Limits reached since `before`: "pids", "memory", "disk:/workspace", "disk:/tmp"."""
    now = snapshot()
    hits = []
    if now.pid_refusals > before.pid_refusals:
        hits.append("pids")
    if now.oom_kills > before.oom_kills:
        hits.append("memory")
    hits += [f"disk:{path}" for path in FILESYSTEMS if _full(path)]
    return hits
