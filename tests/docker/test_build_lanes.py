"""Builds on a shared box, over HTTP: one team's build that hangs holds no other team's job
(a job whose environments are all built is queued in under a second), a cancel stops the
hanging build and its container, and /healthz and /metrics show the image cache."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

import docker
import httpx
import pytest

from tests.docker.conftest import Server
from tests.docker.test_task_suites import tar_of

pytestmark = pytest.mark.docker

RUN = uuid.uuid4().hex[:10]


def task_suite(dockerfile: str) -> bytes:
    return tar_of(
        {
            "only/task.toml": b"[verifier]\ntimeout_sec = 30\n",
            "only/instruction.md": b"Nothing to do.",
            "only/tests/test.sh": b"echo 0 > /logs/verifier/reward.txt\n",
            "only/environment/Dockerfile": dockerfile.encode(),
        }
    )


def submit(client: httpx.Client, dockerfile: str, name: str) -> dict[str, Any]:
    uploaded = client.post(
        f"/v1/suites?name={name}",
        content=task_suite(dockerfile),
        headers={"Content-Type": "application/gzip"},
    )
    assert uploaded.status_code in (200, 201), uploaded.text
    created = client.post(
        "/v1/jobs", json={"suite": uploaded.json()["id"], "variants": {"nop": {"agent": "nop"}}}
    )
    assert created.status_code == 201, created.text
    job: dict[str, Any] = created.json()
    return job


def status(client: httpx.Client, job_id: str) -> str:
    found: str = client.get(f"/v1/jobs/{job_id}").json()["status"]
    return found


def test_a_hanging_build_holds_no_other_teams_job_and_stops_on_cancel(
    start_server: Callable[..., Server], docker_client: docker.DockerClient
) -> None:
    server = start_server()
    hanging = server.as_team(server.team_token(f"hangs-{RUN}"))
    other = server.as_team(server.team_token(f"waits-{RUN}"))
    cached = f"FROM debian:bookworm-slim\nWORKDIR /app\nLABEL examhall.test-run={RUN}\n"

    # The other team's environment, built once.
    first = submit(other, cached, "cached")
    server.wait(first["id"], timeout=600)
    # ... and counted in the box's image cache, measured once the job was prepared.
    deadline = time.monotonic() + 30
    while not (server.http.get("/healthz").json()["image_cache"] or {}).get("images"):
        assert time.monotonic() < deadline, "the image cache was never measured"
        time.sleep(0.2)
    cache = server.http.get("/healthz").json()["image_cache"]
    assert cache["bytes"] > 0 and cache["limit_bytes"] == 50 * 10**9
    metrics = server.http.get("/metrics").text
    assert f"examhall_image_cache_limit_bytes {50 * 10**9}" in metrics
    assert "examhall_image_cache_bytes " in metrics

    marker = f"examhall-hang-{RUN}"
    stuck = submit(hanging, f"FROM debian:bookworm-slim\nRUN sleep 3000 && echo {marker}", "stuck")

    def build_containers() -> list[str]:
        return [
            str(c.id)
            for c in docker_client.containers.list(all=True, ignore_removed=True)
            if marker in " ".join(c.attrs["Config"].get("Cmd") or [])
        ]

    deadline = time.monotonic() + 120
    while not build_containers():
        assert time.monotonic() < deadline, "the hanging build never started"
        time.sleep(0.2)

    started = time.monotonic()
    again = submit(other, cached, "cached")
    while status(other, again["id"]) == "building":
        assert time.monotonic() - started < 1.0, "a cached job waited behind another team's"
        time.sleep(0.02)
    assert status(hanging, stuck["id"]) == "building"

    cancelled = hanging.delete(f"/v1/jobs/{stuck['id']}")
    assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"
    deadline = time.monotonic() + 30
    while build_containers():
        assert time.monotonic() < deadline, "the cancelled build's container is still there"
        time.sleep(0.2)
    server.wait(again["id"])


def test_a_teams_queue_of_builds_holds_another_teams_build_for_one_turn(
    start_server: Callable[..., Server],
    docker_client: docker.DockerClient,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One build slot; one team's job of two slow builds, then another team's job of one
    quick build while the first slow one runs: the quick one is built next, before the slow
    team's second, however long that team's queue (service/environments/build_slots.py)."""
    monkeypatch.setenv("EXAMHALL_BUILD_CONCURRENCY", "1")
    server = start_server()
    slow = server.as_team(server.team_token(f"slow-{RUN}"))
    quick = server.as_team(server.team_token(f"quick-{RUN}"))
    steps = {name: f"examhall-turn-{name}-{RUN}" for name in ("one", "two", "quick")}
    files = {}
    for name in ("one", "two"):
        dockerfile = f"FROM debian:bookworm-slim\nRUN sleep 8 && echo {steps[name]}\n"
        files |= {
            f"{name}/task.toml": b"[verifier]\ntimeout_sec = 30\n",
            f"{name}/instruction.md": b"Nothing to do.",
            f"{name}/tests/test.sh": b"echo 0 > /logs/verifier/reward.txt\n",
            f"{name}/environment/Dockerfile": dockerfile.encode(),
        }
    uploaded = slow.post(
        "/v1/suites?name=slow", content=tar_of(files), headers={"Content-Type": "application/gzip"}
    )
    assert uploaded.status_code == 201, uploaded.text
    slow_job = slow.post(
        "/v1/jobs", json={"suite": uploaded.json()["id"], "variants": {"nop": {"agent": "nop"}}}
    ).json()

    started: dict[str, float] = {}

    def look() -> None:
        for container in docker_client.containers.list(all=True, ignore_removed=True):
            command = " ".join(container.attrs["Config"].get("Cmd") or [])
            for name, marker in steps.items():
                if marker in command:
                    started.setdefault(name, time.monotonic())

    deadline = time.monotonic() + 120
    while len(started) < 1:
        assert time.monotonic() < deadline, "the slow team's first build never started"
        look()
        time.sleep(0.1)
    quick_job = submit(quick, f"FROM debian:bookworm-slim\nRUN echo {steps['quick']}\n", "quick")
    deadline = time.monotonic() + 180
    while len(started) < 3:
        assert time.monotonic() < deadline, f"builds never started: {started}"
        look()
        time.sleep(0.1)
    first = min(started, key=started.__getitem__)
    assert first in ("one", "two")
    second = sorted(started, key=started.__getitem__)[1]
    assert second == "quick", started
    for client, job in ((quick, quick_job), (slow, slow_job)):
        server.wait(job["id"], timeout=300)
        client.close()
