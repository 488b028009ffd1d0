"""Trial overhead: one trivial trial through the Docker backend against a bare `docker run`.

    python3 bench/trial_overhead.py [--trials 40] [--versus-image IMAGE] [--pool N]

Side A is `service.launch.trial.run_trial` on the smoke suite's `create-greeting` case with the
simulated model at p=1 (one tool call, one judge). Side B, the floor, is
`docker run --rm --network none --entrypoint true IMAGE` on the same sandbox image: the
image's entrypoint is the worker, which would wait for a request, so the floor names `true`
as the entrypoint, and no network, as the trial has none.
The sides alternate (A B A B ...); the table gives medians and the ratio A / B, the trial's
breakdown as seen from the control plane (the worker's start split by the step messages it
sends), and the worker's own step timings. `--versus-image` adds a third side, the same trial
on another sandbox image (say, one built before a change to sandbox/), to measure a change
to the worker against the code it replaces, phase by phase. `--pool N` adds the same trial
on a backend with a warm pool of N containers (service/backends/docker/pool.py): its trials
take a container started ahead, and the pool refills in the background while the other sides
run, as it would between a queue's trials; the summary gives its ratio too, and how many of
its trials found a container waiting. After the interleaved run it also runs as many pooled
trials back to back, with no pause for the pool to refill, as a queue longer than the pool
meets it (the pool hides a container's start from a trial, not the engine's work from the
box). The last line, `SUMMARY`, gives the ratio against the
target and the load average before and after the run.
"""

from __future__ import annotations

import argparse
import subprocess
import time
import uuid
from collections.abc import Callable
from functools import partial
from typing import Any

from _common import interleave, median, sandbox_image, table, write_json

from sandbox.protocol import ModelRef, ResultMessage, RunSpec, StepMessage, WorkerMessage
from service.backends.base import LaunchSpec
from service.backends.docker import DockerBackend, DockerSettings
from service.launch.launcher import Launcher
from service.launch.trial import run_trial
from service.launch.worker_channel import SandboxRun
from service.suites.python import load_suite

TARGET_RATIO = 1.15
# Where a trial's time goes, from the control plane: the backend's calls, and the worker's
# start split by the step messages it sends as it goes (each is stamped on arrival).
PHASES = (
    "create",
    "start",
    "pool_take",
    "python_imports",
    "fork_read_spec",
    "scrub_drop",
    "load_bundle",
    "seed_workspace",
    "self_check",
    "agent",
    "judge",
    "exit",
    "teardown",
    "other",
)
WORKER_READY = PHASES[3:9]
POOLED = "pooled trial"


class TimedLauncher(Launcher):
    """The real launch path, noting when each worker message reaches the control plane, so
    the phases inside the container can be told apart from outside it."""

    def __init__(self, settings: DockerSettings) -> None:
        self.docker = DockerBackend(settings)
        super().__init__(self.docker)
        self.marks: dict[str, float] = {}

    def run(self, launch: LaunchSpec, request: bytes, **kwargs: Any) -> SandboxRun:
        forward: Callable[[WorkerMessage], None] = kwargs["on_message"]
        marks: dict[str, float] = {}

        def on_message(message: WorkerMessage) -> None:
            if isinstance(message, StepMessage):
                marks.setdefault(message.step, time.monotonic())
            elif isinstance(message, ResultMessage):
                marks.setdefault("result", time.monotonic())
            forward(message)

        kwargs["on_message"] = on_message
        run = super().run(launch, request, **kwargs)
        marks["converse_end"] = run.ended_at - run.timings.get("teardown", 0.0)
        marks["started"] = run.started_at
        self.marks = marks
        return run


def phases(launcher: TimedLauncher, run: SandboxRun, wall: float) -> dict[str, float]:
    m = launcher.marks
    out = {
        # A pooled trial's container was created and started ahead: it only takes it.
        "create": run.timings.get("create", 0.0),
        "start": run.timings.get("start", 0.0),
        "pool_take": run.timings.get("pool_take", 0.0),
        # The interpreter's start and the worker's imports, up to its first message (the
        # engine may have started the process before `start` returned: then less).
        "python_imports": m["start_as_root"] - m["started"],
        # The fork, the supervisor reading the request and handing it to the child.
        "fork_read_spec": m["scrub_env"] - m["start_as_root"],
        "scrub_drop": m["load_bundle"] - m["scrub_env"],
        "load_bundle": m["seed_workspace"] - m["load_bundle"],
        "seed_workspace": m["self_check"] - m["seed_workspace"],
        "self_check": m["run_agent"] - m["self_check"],
        "agent": m["judge"] - m["run_agent"],
        "judge": m["result"] - m["judge"],
        # The session artifact, the worker's exit and reading the exit state.
        "exit": m["converse_end"] - m["result"],
        "teardown": run.timings["teardown"],
    }
    out["other"] = wall - sum(out.values())
    return out


def load_average() -> str:
    """The 1, 5 and 15 minute load averages: what else the machine was doing."""
    with open("/proc/loadavg") as handle:
        return " ".join(handle.read().split()[:3])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trials", type=int, default=40, help="trials per side (default 40)")
    parser.add_argument("--versus-image", help="also run the trial on this sandbox image")
    parser.add_argument(
        "--pool", type=int, default=0, help="also run the trial with a warm pool of N containers"
    )
    parser.add_argument("--json", help="output file (default bench/results/trial_overhead.json)")
    args = parser.parse_args()

    image = sandbox_image()
    suite = load_suite("smoke")
    images = {"examhall trial": image}
    if args.versus_image:
        images[f"trial on {args.versus_image}"] = args.versus_image
    launchers = {
        name: TimedLauncher(DockerSettings(image=ref, pool_size=0)) for name, ref in images.items()
    }
    if args.pool:
        launchers[POOLED] = TimedLauncher(
            DockerSettings(image=image, pool_size=args.pool, pool_idle_s=600.0)
        )
    breakdowns: dict[str, list[dict[str, float]]] = {name: [] for name in launchers}
    # The worker's own step timings, as it reports them in its result.
    worker_timings: dict[str, list[dict[str, float]]] = {name: [] for name in launchers}
    pool_hits: list[bool] = []
    # Pooled trials back to back, after the interleaved run: with no pause for the pool to
    # refill, as a queue longer than the pool meets it.
    burst: list[float] = []
    burst_hits: list[bool] = []

    def trial(name: str, hits: list[bool] = pool_hits, keep: bool = True) -> float:
        spec = RunSpec(
            trial_id=f"bench-{uuid.uuid4().hex[:12]}",
            suite=suite,
            case_id="create-greeting",
            model=ModelRef("simulated", "coin?p=1"),
        )
        launcher = launchers[name]
        started = time.perf_counter()
        record = run_trial(launcher, spec, job_id="bench", deadline_s=60)
        wall = time.perf_counter() - started
        if record.result.outcome != "passed":
            raise SystemExit(f"the trivial trial did not pass: {record.result}")
        assert record.sandbox is not None
        if name == POOLED:
            hits.append("pool_take" in record.sandbox.timings)
        if not keep:
            return wall
        breakdowns[name].append(phases(launcher, record.sandbox, wall))
        worker_timings[name].append(
            {k: v for k, v in record.result.timings.items() if not k.startswith("container_")}
        )
        return wall

    def floor() -> float:
        started = time.perf_counter()
        subprocess.run(
            # No network, as the trial's own container has none: on the bridge the floor
            # would pay for a veth the trial never gets (and fail on an engine without one).
            ["docker", "run", "--rm", "--network", "none", "--entrypoint", "true", image],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        return time.perf_counter() - started

    load_before = load_average()
    print(f"{args.trials} trials per side, interleaved, image {image}, load {load_before}")
    sides: dict[str, Callable[[], float]] = {name: partial(trial, name) for name in launchers}
    sides["docker run --rm"] = floor
    try:
        samples = interleave(sides, args.trials)
        if args.pool:
            burst = [trial(POOLED, burst_hits, keep=False) for _ in range(args.trials)]
    finally:
        for launcher in launchers.values():
            launcher.docker.close_pool()
    load_after = load_average()
    pool_hits = pool_hits[-args.trials :]
    for name in launchers:  # drop the warm-up's
        breakdowns[name] = breakdowns[name][-args.trials :]
        worker_timings[name] = worker_timings[name][-args.trials :]
    medians = {name: median(values) or 0.0 for name, values in samples.items()}
    trial_s, floor_s = medians["examhall trial"], medians["docker run --rm"]
    ratio = trial_s / floor_s

    print()
    print(
        table(
            ["side", "median s", "min s", "max s", "/ floor"],
            [
                [name, medians[name], min(values), max(values), medians[name] / floor_s]
                for name, values in samples.items()
            ],
        )
    )
    breakdown = {
        name: {p: median([b[p] for b in rows]) or 0.0 for p in PHASES}
        for name, rows in breakdowns.items()
    }
    for parts in breakdown.values():
        parts["worker_ready"] = sum(parts[p] for p in WORKER_READY)
    steps = {
        name: {
            key: median([t[key] for t in rows if key in t]) or 0.0
            for key in sorted({k for t in rows for k in t})
        }
        for name, rows in worker_timings.items()
    }
    print("\nmedians of each phase, seen from the control plane (s):")
    print(
        table(
            ["phase", *launchers],
            [[p, *(breakdown[n][p] for n in launchers)] for p in [*PHASES, "worker_ready"]],
        )
    )
    print("\nmedians of the worker's own step timings (s):")
    keys = sorted({k for n in launchers for k in steps[n]})
    print(table(["step", *launchers], [[k, *(steps[n].get(k) for n in launchers)] for k in keys]))
    versus = None
    if args.versus_image:
        versus = medians[f"trial on {args.versus_image}"] / trial_s
    pooled = medians[POOLED] / floor_s if args.pool else None
    met = ratio <= TARGET_RATIO
    print(
        f"\nSUMMARY trial {trial_s:.3f} s / floor {floor_s:.3f} s = {ratio:.2f}x, target <= "
        f"{TARGET_RATIO}x: {'met' if met else 'MISSED'}"
        + (f"; {args.versus_image} / this image = {versus:.2f}x" if versus else "")
        + (
            f"; pooled trial {medians[POOLED]:.3f} s / floor = {pooled:.2f}x, "
            f"{sum(pool_hits)}/{len(pool_hits)} took a waiting container; back to back "
            f"{median(burst) or 0.0:.3f} s, {sum(burst_hits)}/{len(burst_hits)} took one"
            if pooled is not None
            else ""
        )
        + f"; load {load_before} -> {load_after}"
    )
    write_json(
        "trial_overhead",
        {
            "image": image,
            "trials_per_side": args.trials,
            "load_average": {"before": load_before, "after": load_after},
            "median_s": medians,
            "ratio": ratio,
            "versus_image": args.versus_image,
            "versus_ratio": versus,
            "pool_size": args.pool,
            "pooled_ratio": pooled,
            "pool_hits": sum(pool_hits),
            "pool_back_to_back_s": burst,
            "pool_back_to_back_hits": sum(burst_hits),
            "target_ratio": TARGET_RATIO,
            "met": met,
            "breakdown_median_s": breakdown,
            "worker_step_median_s": steps,
            "samples_s": samples,
            "breakdowns": breakdowns,
        },
        args.json,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
