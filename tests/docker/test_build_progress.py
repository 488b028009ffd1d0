"""A building job a user can watch, on a real engine and store: one job's environments
built side by side under EXAMHALL_BUILD_CONCURRENCY, each task's build (its step, its
seconds, cached or built) on the job's event stream and in the CLI's output."""

from __future__ import annotations

import contextlib
import io
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import docker.errors
import httpx
import pytest

from examhall import Client
from service.cli.progress import watch
from tests.docker.conftest import Server, free_port, serve_process, wait_healthy
from tests.docker.test_task_suites import examhall, write_task

pytestmark = pytest.mark.docker

RUN = uuid.uuid4().hex[:10]
TASKS = ("alpha", "beta", "gamma")
PASS_TEST = b"echo 1 > /logs/verifier/reward.txt\n"


@pytest.fixture
def two_slot_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Server]:
    """A control plane in a process of its own (the build cap is per process, fixed at its
    first build) with two build slots."""
    database, log, port = tmp_path / "examhall.db", tmp_path / "serve.log", free_port()
    token = f"exh_progress_{uuid.uuid4().hex}"
    monkeypatch.setenv("EXAMHALL_BUILD_CONCURRENCY", "2")
    process = serve_process(f"sqlite:///{database}", port, log, token=token, max_containers=2)
    monkeypatch.delenv("EXAMHALL_BUILD_CONCURRENCY")
    url = f"http://127.0.0.1:{port}"
    http = httpx.Client(base_url=url, timeout=120, headers={"Authorization": f"Bearer {token}"})

    def stop() -> None:
        http.close()
        if process.poll() is None:
            process.terminate()
            process.wait(timeout=60)

    try:
        wait_healthy(process, port, log)
        yield Server(url, f"sqlite:///{database}", http, stop, token)
    finally:
        stop()


@pytest.fixture
def our_images(docker_client: docker.DockerClient) -> Iterator[list[str]]:
    """The environment images the test built, removed after it (others' are left alone)."""
    made: list[str] = []
    yield made
    for ref in dict.fromkeys(made):
        with contextlib.suppress(docker.errors.ImageNotFound):
            docker_client.images.remove(ref, force=True)


def suite_dir(root: Path) -> Path:
    """Three tasks, each a few seconds of build of its own (new to the engine: the run's
    label is in every one's hash)."""
    for name in TASKS:
        dockerfile = (
            f"FROM debian:bookworm-slim\nWORKDIR /app\nLABEL examhall.test-run={RUN}\n"
            f"RUN sleep 4 && echo {name} > /app/{name}\n"
        ).encode()
        write_task(root, name, PASS_TEST, None, dockerfile)
    return root


def test_a_jobs_environments_build_side_by_side_and_the_stream_and_cli_tell_each(
    two_slot_server: Server, tmp_path: Path, our_images: list[str]
) -> None:
    server = two_slot_server
    suite = Client(server.url, server.token).upload(suite_dir(tmp_path / "suite"))
    job = server.submit(suite=suite.id, variants={"nop": {"agent": "nop"}})
    assert job["status"] == "building"

    # The CLI's own follower (`examhall submit` calls it), and a raw stream beside it.
    printed = io.StringIO()
    follower = Client(server.url, server.token)
    following = threading.Thread(target=watch, args=(follower, job["id"]), kwargs={"out": printed})
    following.start()
    events: list[tuple[float, dict[str, Any]]] = []
    watcher = Client(server.url, server.token)
    for followed in watcher.follow(job["id"]):
        if followed.event == "build":
            events.append((time.monotonic(), followed.data))
    watcher.close()
    following.join(timeout=120)
    follower.close()
    assert not following.is_alive()

    # Two builds were running at one moment: the stream's states, in the order told.
    latest: dict[str, str] = {}
    most = 0
    for _, data in events:
        latest[data["case"]] = data["state"]
        most = max(most, sum(state == "building" for state in latest.values()))
    assert most >= 2, events
    # Each task was told building at its own steps, then built, with its seconds.
    # What the plane said besides its access log: a fault, a second preparation.
    served = "\n".join(
        line
        for line in (tmp_path / "serve.log").read_text(errors="replace").splitlines()
        if '" 200 OK' not in line
    )[-8000:]
    # No fault of ours on the way (a first build that fails and a job prepared again).
    assert "Traceback" not in served, served
    for name in TASKS:
        told = [data for _, data in events if data["case"] == name]
        # A string, which pytest prints whole (a tuple it would cut in the middle).
        assert told[-1]["state"] == "built" and told[-1]["elapsed_s"] >= 4, f"{told}\n{served}"
        assert told[-1]["of"] == len(TASKS) and told[-1]["index"] == TASKS.index(name) + 1
        steps = {data["step"] for data in told if data["state"] == "building"}
        assert f"Step 4/4 : RUN sleep 4 && echo {name} > /app/{name}" in steps, steps
    # The job's page of the API holds the same end states.
    shown = server.http.get(f"/v1/jobs/{job['id']}").json()["builds"]
    assert {case: build["state"] for case, build in shown.items()} == dict.fromkeys(TASKS, "built")
    trials = server.http.get(f"/v1/jobs/{job['id']}/trials").json()
    our_images.extend(trial["image"] for trial in trials)
    assert len({trial["image"] for trial in trials}) == len(TASKS)
    assert {trial["status"] for trial in trials} == {"finished"}

    lines = printed.getvalue().splitlines()
    for name in TASKS:
        where = f"{TASKS.index(name) + 1}/{len(TASKS)}: {name}"
        assert any(
            line.startswith(f"building {where} Step 4/4 : RUN sleep 4") and line.endswith(" s")
            for line in lines
        ), lines
        assert any(line.startswith(f"built {where} in ") for line in lines), lines

    # Submitted again, every environment is found by its hash: cached, nothing built.
    again = examhall(server, "submit", str(tmp_path / "suite"), "--agent", "nop")
    assert again.returncode == 0, again.stderr
    for name in TASKS:
        assert f"cached {TASKS.index(name) + 1}/{len(TASKS)}: {name}" in again.stderr
    assert "building " not in again.stderr, again.stderr
