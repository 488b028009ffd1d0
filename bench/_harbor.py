"""The Harbor side of bench/throughput.py: its images, one job, and the cleanup after it.

Harbor (PyPI `harbor`) needs Python >= 3.12; this machine has bookworm's 3.11. So Harbor runs
in a container (bench/harbor/runner.Dockerfile) built on service/images/compose_v2.py's image
(Debian trixie, bootstrapped the way the sandbox's base is, with Debian's docker CLI and
Compose v2), with the host's Docker socket mounted: its trial containers are
the host engine's, as Inspect's and the exam hall's are. The work directory and
bench/harbor are mounted at their own paths, because the paths Harbor hands to the engine
(the trials' log directories it bind-mounts, the Compose files) must mean the same there.

The job: bench/harbor/tasks (the smoke suite's four cases as Harbor tasks) x trials/4
attempts with Harbor's `oracle` agent (it runs solution/solve.sh; tests/test.sh writes the
reward) in Harbor's local `docker` environment, `--n-concurrent C`. The tasks name a
prebuilt image (docker_image) and bench/harbor/no-network.yaml takes their network away.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from _common import BENCH_DIR

HARBOR_VERSION = "0.26.0"
HARBOR_DIR = BENCH_DIR / "harbor"
TASKS_DIR = HARBOR_DIR / "tasks"
TASK_IMAGE = "examhall-bench/harbor-task:latest"
RUNNER_REPO = "examhall-bench/harbor-runner"
DOCKER_SOCKET = Path("/var/run/docker.sock")
# On the runner containers, so that a leftover one is known for this benchmark's.
RUNNER_LABEL = "examhall-bench=harbor"
# Compose overlays per variant, after Harbor's own files: `harbor` is Harbor as it ships
# (plus no network); `harbor-init` adds `init: true`, because Harbor's main service runs
# `sh -c "sleep infinity"` as PID 1, which ignores SIGTERM, so `docker compose down` waits
# out the 10 s stop timeout at the end of every trial.
OVERLAYS = {
    "harbor": ("no-network.yaml",),
    "harbor-init": ("no-network.yaml", "init.yaml"),
}

Progress = Callable[[str], None]


def _stderr(line: str) -> None:
    print(line, file=sys.stderr)


def task_image() -> None:
    subprocess.run(
        ["docker", "build", "-q", "-t", TASK_IMAGE, str(HARBOR_DIR)],
        check=True,
        stdout=subprocess.DEVNULL,
    )


def runner_image(progress: Progress = _stderr) -> str:
    """The image Harbor runs in, built once per recipe, base and version and then reused.

    Its wheels are downloaded here, on the host: containers do not trust the proxy in front
    of the package index, so pip runs offline in the build, from its own wheel."""
    import docker

    from service.images.compose_v2 import compose_v2_image
    from service.images.sandbox_image import (
        HASH_LABEL,
        BuildContext,
        build_image,
        fields_digest,
        is_current,
    )
    from service.images.wheels import download_wheels, image_glibc, python_version

    client = docker.from_env()
    try:
        base = compose_v2_image(client, progress)
        dockerfile = (HARBOR_DIR / "runner.Dockerfile").read_bytes()
        digest = fields_digest(
            [
                ("Dockerfile", dockerfile),
                ("base", base.encode()),
                ("harbor", HARBOR_VERSION.encode()),
            ]
        )
        ref = f"{RUNNER_REPO}:{digest[:12]}"
        if is_current(client, ref, digest):
            return ref
        with tempfile.TemporaryDirectory(prefix="examhall-bench-harbor-wheels-") as scratch:
            download_wheels(
                [f"harbor=={HARBOR_VERSION}"],
                python_version(client, base),
                Path(scratch),
                progress,
                glibc=image_glibc(client, base),
            )
            wheels = tuple(
                (f"wheels/{path.name}", path.read_bytes())
                for path in sorted(Path(scratch).iterdir())
            )
        progress(f"Building {ref} (Harbor {HARBOR_VERSION}) on {base}...")
        build_image(
            client,
            BuildContext(dockerfile, wheels),
            ref,
            base,
            labels={HASH_LABEL: digest},
            nocache=False,
            progress=progress,
            advice="Fix the cause above (the recipe is bench/harbor/runner.Dockerfile; apt in "
            "the build must reach a Debian mirror), then run this again.",
        )
        return ref
    finally:
        client.close()


def versions(runner: str) -> dict[str, str]:
    """Harbor's and Compose's versions as the runner has them, for the results file."""

    def ask(*argv: str) -> str:
        command = ["docker", "run", "--rm", "--network", "none", *argv]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        return done.stdout.strip() or f"unknown ({done.stderr.strip()[-200:]})"

    return {
        "harbor": ask(runner, "--version"),
        "compose": ask("--entrypoint", "docker", runner, "compose", "version", "--short"),
    }


def run_harbor(
    runner: str,
    workdir: Path,
    trials: int,
    concurrency: int,
    variant: str,
    cases: int,
    *,
    tasks: Path = TASKS_DIR,
    agent: str = "oracle",
) -> dict[str, Any]:
    """One Harbor job; its rate is timed from the job's start to its end as Harbor records
    them in the job's result.json (as Inspect's are from its log), and also by wall clock
    around `docker run` (which adds the runner container and Harbor's start)."""
    if not DOCKER_SOCKET.is_socket():
        raise RuntimeError(
            f"{DOCKER_SOCKET} is not a socket: the Harbor runner reaches the engine through "
            f"it. Run this where Docker listens on {DOCKER_SOCKET}, or leave Harbor out "
            f"(--systems examhall,inspect)."
        )
    jobs = workdir / "harbor-jobs"
    jobs.mkdir(exist_ok=True)
    job = f"{variant}-c{concurrency}-{time.monotonic_ns()}"
    container = f"examhall-bench-{job}"
    overlays = [
        arg
        for name in OVERLAYS[variant]
        for arg in ("--extra-docker-compose", str(HARBOR_DIR / name))
    ]
    command = [
        "docker", "run", "--rm", "--name", container, "--label", RUNNER_LABEL,
        # Harbor needs no network of its own: the engine is a socket away. Without one, its
        # telemetry and litellm's model-price fetch cannot leave the machine either.
        "--network", "none",
        "-e", "HARBOR_TELEMETRY=0", "-e", "LITELLM_LOCAL_MODEL_COST_MAP=True",
        "-v", f"{DOCKER_SOCKET}:{DOCKER_SOCKET}",
        "-v", f"{workdir}:{workdir}", "-v", f"{HARBOR_DIR}:{HARBOR_DIR}:ro", "-w", str(workdir),
        runner,
        "run", "--yes", "--quiet", "--path", str(tasks), "--agent", agent,
        "--env", "docker", "--n-attempts", str(trials // cases),
        "--n-concurrent", str(concurrency), "--jobs-dir", str(jobs), "--job-name", job,
        *overlays,
    ]  # fmt: skip
    started = time.perf_counter()
    try:
        done = subprocess.run(command, capture_output=True, text=True, check=False)
    finally:
        wall = time.perf_counter() - started
        clean_up(container, jobs / job)
    result_path = jobs / job / "result.json"
    if done.returncode != 0 or not result_path.exists():
        raise RuntimeError(
            f"Harbor failed (exit {done.returncode}; its log is {jobs / job / 'job.log'}): "
            f"{(done.stdout + done.stderr)[-3000:]}"
        )
    result = json.loads(result_path.read_text())
    elapsed = (
        datetime.fromisoformat(result["finished_at"]) - datetime.fromisoformat(result["started_at"])
    ).total_seconds()
    trials_done = sorted((jobs / job).glob("*/result.json"))
    outcomes = [_trial_outcome(path) for path in trials_done]
    by_task: dict[str, list[tuple[float | None, str | None]]] = {}
    for path, outcome in zip(trials_done, outcomes, strict=True):
        by_task.setdefault(_task_of(path), []).append(outcome)
    planned = int(result["n_total_trials"])
    return {
        "seconds": elapsed,
        "wall_s": wall,
        "trials": planned,
        "finished": len(outcomes),
        "passed": sum(1 for reward, error in outcomes if reward == 1 and error is None),
        "errors": sum(1 for _, error in outcomes if error is not None),
        "per_minute": 60 * planned / elapsed,
        "phases_s": _phase_medians(jobs / job),
        "by_task": by_task,
    }


def _task_of(path: Path) -> str:
    """The task's directory name of a trial's result.json."""
    trial = json.loads(path.read_text())
    local = (trial.get("task_id") or {}).get("path")
    return Path(local).name if local else str(trial.get("task_name", "")).rpartition("/")[2]


def _trial_outcome(path: Path) -> tuple[float | None, str | None]:
    trial = json.loads(path.read_text())
    rewards = (trial.get("verifier_result") or {}).get("rewards") or {}
    error = trial.get("exception_info")
    return rewards.get("reward"), None if error is None else str(error.get("exception_type"))


# Where a Harbor trial's time goes, as its result.json records the phases; `teardown` is from
# the verifier's end to the trial's (mostly `docker compose down`).
_PHASES = ("environment_setup", "agent_execution", "verifier")


def _phase_medians(job_dir: Path) -> dict[str, float]:
    import statistics

    spans: dict[str, list[float]] = {name: [] for name in (*_PHASES, "teardown", "trial")}
    for path in job_dir.glob("*/result.json"):
        trial = json.loads(path.read_text())
        for name in _PHASES:
            phase = trial.get(name) or {}
            if phase.get("started_at") and phase.get("finished_at"):
                spans[name].append(_seconds(phase["started_at"], phase["finished_at"]))
        if trial.get("started_at") and trial.get("finished_at"):
            spans["trial"].append(_seconds(trial["started_at"], trial["finished_at"]))
            if (trial.get("verifier") or {}).get("finished_at"):
                spans["teardown"].append(
                    _seconds(trial["verifier"]["finished_at"], trial["finished_at"])
                )
    return {name: round(statistics.median(v), 3) for name, v in spans.items() if v}


def _seconds(start: str, end: str) -> float:
    return (datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds()


def clean_up(container: str, job_dir: Path) -> None:
    """Remove what one Harbor job started: its runner container, and each trial's Compose
    project (containers and networks), which a killed or failed job can leave behind.
    Only names this job made are touched."""
    subprocess.run(["docker", "rm", "-f", container], capture_output=True, check=False)
    if not job_dir.is_dir():
        return
    for trial in job_dir.iterdir():
        if not trial.is_dir():
            continue
        project = _compose_project(f"{trial.name}__env")
        label = f"label=com.docker.compose.project={project}"
        for kind in ("container", "network"):
            listed = subprocess.run(
                ["docker", kind, "ls", "-aq" if kind == "container" else "-q", "--filter", label],
                capture_output=True,
                text=True,
                check=False,
            )
            ids = listed.stdout.split()
            if ids:
                remove = ["rm", "-f"] if kind == "container" else ["rm"]
                subprocess.run(["docker", kind, *remove, *ids], capture_output=True, check=False)


def _compose_project(session_id: str) -> str:
    """Harbor's Compose project name for a session (its _sanitize_docker_compose_project_name)."""
    name = session_id.lower()
    if not re.match(r"^[a-z0-9]", name):
        name = "0" + name
    return re.sub(r"[^a-z0-9_-]", "-", name)
