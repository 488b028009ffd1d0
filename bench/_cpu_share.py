"""A process held to a share of the machine's CPU, by a cgroup of its own (CFS quota).

bench/scheduler.py uses it to run each control plane as if on a box of its own: two planes
on this 2-core machine otherwise share the cores with each other and with their store, and
a ratio of two planes to one then measures the machine's cores rather than how the planes
scale. cgroup v1's cpu controller (`cpu.cfs_quota_us`) or v2's (`cpu.max`, where the root
hands the cpu controller down); needs root.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from pathlib import Path

PERIOD_US = 100_000
_V1 = Path("/sys/fs/cgroup/cpu")
_V2_ROOTS = (Path("/sys/fs/cgroup"), Path("/sys/fs/cgroup/unified"))


def _v2_root() -> Path | None:
    for root in _V2_ROOTS:
        control = root / "cgroup.subtree_control"
        if control.exists() and "cpu" in control.read_text().split():
            return root
    return None


@contextlib.contextmanager
def cpu_share(pid: int, cpus: float) -> Iterator[Path]:
    """Hold process `pid` (and the threads and children it starts after) to `cpus` CPUs
    until the block ends; the cgroup is removed then, once the process has exited."""
    if cpus <= 0:
        raise ValueError(f"a CPU share must be more than 0, not {cpus}")
    quota = max(1000, round(cpus * PERIOD_US))
    name = f"examhall-bench-{uuid.uuid4().hex[:8]}"
    if (_V1 / "cpu.cfs_quota_us").exists():
        group = _V1 / name
        group.mkdir()
        (group / "cpu.cfs_period_us").write_text(str(PERIOD_US))
        (group / "cpu.cfs_quota_us").write_text(str(quota))
    elif (root := _v2_root()) is not None:
        group = root / name
        group.mkdir()
        (group / "cpu.max").write_text(f"{quota} {PERIOD_US}")
    else:
        raise SystemExit(
            "a CPU share needs a cgroup cpu controller this process may write (cgroup v1's "
            "/sys/fs/cgroup/cpu, or v2 with cpu in cgroup.subtree_control) and root; "
            "run without --plane-cpus"
        )
    try:
        (group / "cgroup.procs").write_text(str(pid))
        yield group
    finally:
        with contextlib.suppress(OSError):  # still has a task: the caller did not wait
            group.rmdir()
