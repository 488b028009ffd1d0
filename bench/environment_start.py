"""A cached task environment at a trial's start: the same trivial trial on the bare sandbox
image and on an environment image (Debian with jq, examhall's worker layered on), side by
side, and what finding the cached environment costs.

    python3 bench/environment_start.py [--trials 30]

Side A is `run_trial` on the smoke suite's `create-greeting` case (simulated model at p=1)
in the sandbox image; side B is the same trial, the same launch path, in the environment's
image. The sides alternate (A B A B ...). Separately, `EnvironmentBuilder.build` of the
already-built environment is timed: the whole cost of a cache hit, paid once per job by the
preparer, never per trial.
"""

from __future__ import annotations

import argparse
import time
import uuid

import docker
from _common import interleave, median, sandbox_image, table, write_json

from sandbox.protocol import ModelRef, RunSpec
from service.backends.docker import DockerBackend, DockerSettings
from service.environments import DeclarativeEnvironment, EnvironmentBuilder, declarative_source
from service.images.docker_engine import DockerImageEngine
from service.launch.launcher import Launcher
from service.launch.trial import Placement, run_trial
from service.suites.python import load_suite


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trials", type=int, default=30, help="trials per side (default 30)")
    parser.add_argument("--json", help="output file (default bench/results/environment_start.json)")
    args = parser.parse_args()

    image = sandbox_image()
    client = docker.from_env()
    builder = EnvironmentBuilder(DockerImageEngine(client), sandbox_image=image)
    source = declarative_source("bench environment", DeclarativeEnvironment(apt=["jq"]))
    built = builder.build(source, lambda line: None)  # built now, or found
    launcher = Launcher(DockerBackend(DockerSettings(image=image)))
    suite = load_suite("smoke")

    def trial(placement: Placement | None) -> float:
        spec = RunSpec(
            trial_id=f"bench-{uuid.uuid4().hex[:12]}",
            suite=suite,
            case_id="create-greeting",
            model=ModelRef("simulated", "coin?p=1"),
        )
        started = time.perf_counter()
        record = run_trial(launcher, spec, job_id="bench", deadline_s=60, placement=placement)
        wall = time.perf_counter() - started
        if record.result.outcome != "passed":
            raise SystemExit(f"the trivial trial did not pass: {record.result}")
        return wall

    def cache_hit() -> float:
        started = time.perf_counter()
        found = builder.build(source, lambda line: None)
        assert found.ref == built.ref
        return time.perf_counter() - started

    print(f"{args.trials} trials per side, interleaved; sandbox {image}, environment {built.ref}")
    samples = interleave(
        {
            "trial, sandbox image": lambda: trial(None),
            "trial, environment image": lambda: trial(Placement(image=built.ref)),
        },
        args.trials,
    )
    hits = [cache_hit() for _ in range(args.trials)]
    bare = median(samples["trial, sandbox image"])
    env = median(samples["trial, environment image"])
    assert bare is not None and env is not None
    print()
    rows = [[name, median(v), min(v), max(v)] for name, v in samples.items()]
    rows.append(["cache hit (per job)", median(hits), min(hits), max(hits)])
    print(table(["side", "median s", "min s", "max s"], rows))
    print(f"\nratio environment / sandbox: {env / bare:.3f}x")
    write_json(
        "environment_start",
        {
            "trials": args.trials,
            "sandbox_image": image,
            "environment_image": built.ref,
            "median_s": {name: median(v) for name, v in samples.items()},
            "cache_hit_median_s": median(hits),
            "ratio": env / bare,
        },
        args.json,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
