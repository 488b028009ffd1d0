"""Trial overhead: one trivial trial through the Docker backend against a bare `docker run`.

    python3 bench/trial_overhead.py [--trials 40] [--versus-image IMAGE]

Side A is `service.launch.trial.run_trial` on the smoke suite's `create-greeting` case with the
simulated model at p=1 (one tool call, one judge). Side B, the floor, is
`docker run --rm --entrypoint true IMAGE` on the same sandbox image: the image's entrypoint
is the worker, which would wait for a request, so the floor names `true` as the entrypoint.
The sides alternate (A B A B ...); the table gives medians and the ratio A / B, and the
trial's breakdown as seen from the control plane. `--versus-image` adds a third side, the
same trial on another sandbox image (say, one built before a change to sandbox/), to
measure a change to the worker against the code it replaces.
"""

from __future__ import annotations

import argparse
import subprocess
import time
import uuid
from collections.abc import Callable
from typing import Any

from _common import interleave, median, sandbox_image, table, write_json

from sandbox.protocol import ModelRef, ResultMessage, RunSpec, StepMessage, WorkerMessage
from service.backends.docker import DockerBackend, DockerSettings
from service.backends.protocol import LaunchSpec
from service.launch.conversation import SandboxRun
from service.launch.launcher import Launcher
from service.launch.trial import run_trial
from service.suites import load_suite

TARGET_RATIO = 1.3
PHASES = ("create", "start", "worker_ready", "agent", "judge", "exit", "teardown", "other")


class TimedLauncher(Launcher):
    """The real launch path, noting when each worker message reaches the control plane, so
    the phases inside the container can be told apart from outside it."""

    def __init__(self, settings: DockerSettings) -> None:
        super().__init__(DockerBackend(settings))
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
        "create": run.timings["create"],
        "start": run.timings["start"],
        # Python start, read the spec, load the bundle, fork, drop privileges, self-check.
        "worker_ready": m["run_agent"] - m["started"],
        "agent": m["judge"] - m["run_agent"],
        "judge": m["result"] - m["judge"],
        # The session artifact, the worker's exit and reading the exit state.
        "exit": m["converse_end"] - m["result"],
        "teardown": run.timings["teardown"],
    }
    out["other"] = wall - sum(out.values())
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trials", type=int, default=40, help="trials per side (default 40)")
    parser.add_argument("--versus-image", help="also run the trial on this sandbox image")
    parser.add_argument("--json", help="output file (default bench/results/trial_overhead.json)")
    args = parser.parse_args()

    image = sandbox_image()
    launcher = TimedLauncher(DockerSettings(image=image))
    other = TimedLauncher(DockerSettings(image=args.versus_image or image))
    suite = load_suite("smoke")
    breakdowns: list[dict[str, float]] = []

    def trial(launcher: TimedLauncher = launcher, keep: bool = True) -> float:
        spec = RunSpec(
            trial_id=f"bench-{uuid.uuid4().hex[:12]}",
            suite=suite,
            case_id="create-greeting",
            model=ModelRef("simulated", "coin?p=1"),
        )
        started = time.perf_counter()
        record = run_trial(launcher, spec, job_id="bench", deadline_s=60)
        wall = time.perf_counter() - started
        if record.result.outcome != "passed":
            raise SystemExit(f"the trivial trial did not pass: {record.result}")
        assert record.sandbox is not None
        if keep:
            breakdowns.append(phases(launcher, record.sandbox, wall))
        return wall

    def floor() -> float:
        started = time.perf_counter()
        subprocess.run(
            ["docker", "run", "--rm", "--entrypoint", "true", image],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        return time.perf_counter() - started

    print(f"{args.trials} trials per side, interleaved, image {image}")
    sides = {"examhall trial": trial, "docker run --rm": floor}
    if args.versus_image:
        sides[f"trial on {args.versus_image}"] = lambda: trial(other, keep=False)
    samples = interleave(sides, args.trials)
    breakdowns = breakdowns[-args.trials :]  # drop the warm-up's
    trial_s = median(samples["examhall trial"])
    floor_s = median(samples["docker run --rm"])
    assert trial_s is not None and floor_s is not None
    ratio = trial_s / floor_s

    print()
    print(
        table(
            ["side", "median s", "min s", "max s"],
            [[name, median(values), min(values), max(values)] for name, values in samples.items()],
        )
    )
    print(f"\nratio trial / floor: {ratio:.2f}x (target <= {TARGET_RATIO}x)")
    versus = None
    if args.versus_image:
        versus = (median(samples[f"trial on {args.versus_image}"]) or 0.0) / trial_s
        print(f"trial on {args.versus_image} / trial: {versus:.2f}x")
    breakdown = {p: median([b[p] for b in breakdowns]) for p in PHASES}
    print()
    print(table(["phase", "median s"], [[p, v] for p, v in breakdown.items()]))
    write_json(
        "trial_overhead",
        {
            "image": image,
            "trials_per_side": args.trials,
            "median_s": {"trial": trial_s, "floor": floor_s},
            "ratio": ratio,
            "versus_image": args.versus_image,
            "versus_ratio": versus,
            "target_ratio": TARGET_RATIO,
            "met": ratio <= TARGET_RATIO,
            "breakdown_median_s": breakdown,
            "samples_s": samples,
            "breakdowns": breakdowns,
        },
        args.json,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
