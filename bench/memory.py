"""Memory: the control plane's resident memory with 100k trials queued and their report.

    python3 bench/memory.py [--cases 1000] [--rounds 100] [--trial-list]

`examhall serve` runs in a subprocess on a fresh SQLite store with
EXAMHALL_MAX_CONTAINERS=1. A suite of `--cases` cases whose solution sleeps for ten
minutes is uploaded as a job of `--rounds` rounds (10k trials by default) with
`simulated/coin?p=1` (100k trials by default): one trial holds the only container and the
rest stay queued. VmRSS is read from /proc at each stage: idle, with the job queued
(sampled for a few seconds while the scheduler polls), after reading the job's status and
its report (built once, then kept), and with `--trial-list` after `GET /v1/jobs/{id}/trials`
too (every trial's full view in one response). The control plane is then stopped
(Ctrl-C), which kills the running trial's container.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from _common import ControlPlane, rss_mib, sandbox_image, table, write_json

TARGET_MIB = 150.0

HOLD_SUITE = '''"""Cases whose agent sleeps: the one container holds, the job stays queued."""

from sandbox import faux, judges
from sandbox.suite import Case

CASES = [
    Case(
        id=f"hold-{n:04d}",
        input="Wait, then write done.txt.",
        tools=("bash", "write"),
        judges=[judges.file_equals("done.txt", "done")],
        scripts={
            "solution": [
                faux.bash("sleep 600"),
                faux.call("write", path="done.txt", content="done\\n"),
                faux.text("Done."),
            ]
        },
    )
    for n in range(CASES_COUNT)
]
'''


def sample(plane: ControlPlane, seconds: float) -> list[float]:
    values = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        values.append(rss_mib(plane.process.pid))
        time.sleep(0.25)
    return values


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", type=int, default=1000)
    parser.add_argument("--trial-list", action="store_true", help="also list every trial")
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--json", help="output file (default bench/results/memory.json)")
    args = parser.parse_args()

    sandbox_image()
    stages: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="examhall-bench-") as tmp:
        plane = ControlPlane(Path(tmp), max_containers=1)
        try:
            plane.wait_ready()
            stages["idle"] = max(sample(plane, 3))
            source = HOLD_SUITE.replace("CASES_COUNT", str(args.cases))
            created = plane.submit(
                {
                    "suite": {"name": "bench_hold", "source": source},
                    "model": {"provider": "simulated", "id": "coin?p=1"},
                    "rounds": args.rounds,
                    "limits": {"timeout_s": 900},
                }
            )
            job_id = created["id"]
            queued = sample(plane, 8)
            view = plane.job(job_id)
            stages["queued"] = max(queued)
            headers = plane.headers

            def read(path: str) -> None:
                url = f"{plane.url}{path}"
                httpx.get(url, headers=headers, timeout=600).raise_for_status()

            read(f"/v1/jobs/{job_id}/report")
            stages["after the report"] = max(sample(plane, 2))
            if args.trial_list:
                read(f"/v1/jobs/{job_id}/trials")
                stages["after the trial list"] = max(sample(plane, 2))
        finally:
            plane.stop()

    counts: dict[str, Any] = view["counts"]
    print(f"job of {created['planned_trials']:,} trials: {counts}")
    print()
    print(table(["stage", "VmRSS MiB"], [[k, v] for k, v in stages.items()]))
    print(f"target: < {TARGET_MIB:.0f} MiB resident with the job queued and its report built")
    write_json(
        "memory",
        {
            "planned_trials": created["planned_trials"],
            "counts_when_sampled": counts,
            "rss_mib": stages,
            "target_mib": TARGET_MIB,
            "met": max(stages["queued"], stages["after the report"]) < TARGET_MIB,
        },
        args.json,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
