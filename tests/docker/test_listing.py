"""Listing an uploaded suite through the API: within the box's and the team's container
caps, off the request threads, with a short deadline, a reason when it fails, case ids that
fit the store, and containers that a killed control plane leaves reaped by the next one."""

from __future__ import annotations

import os
import signal
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import docker
import httpx
import pytest

from service.backends.docker import LABEL_OWNER, LABEL_TRIAL
from service.settings import Settings
from tests.docker.conftest import Server, free_port, serve, serve_process, wait_healthy

pytestmark = pytest.mark.docker

FAUX = {"provider": "faux", "id": "solution"}


def suite(prelude: str = "", case_id: str = "only") -> dict[str, str]:
    """An uploaded suite, unique per call so no cached listing answers for it."""
    source = f"""# {uuid.uuid4().hex}
{prelude}
from sandbox import faux, judges
from sandbox.suite import Case

CASES = [Case(id={case_id!r}, input="Say hi.", judges=[judges.final_text_contains("hi")],
              scripts={{"solution": [faux.text("hi")]}})]
"""
    return {"name": "uploaded", "source": source}


def list_containers(client: docker.DockerClient, owner_prefix: str) -> list[Any]:
    return [
        c
        for c in client.containers.list(all=True, sparse=True, filters={"label": LABEL_TRIAL})
        if (c.attrs.get("Labels") or {}).get(LABEL_OWNER, "").startswith(owner_prefix)
        and (c.attrs.get("Labels") or {}).get(LABEL_TRIAL, "").startswith("list-")
    ]


def _ours() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:"


@pytest.mark.parametrize("team_cap", [None, 1], ids=["box-cap", "team-cap"])
def test_listings_hold_container_slots_and_no_request_thread(
    start_server: Callable[..., Server],
    docker_client: docker.DockerClient,
    team_cap: int | None,
) -> None:
    # The box allows 1 container; or 2, of which the team may hold 1.
    server = start_server(
        max_containers=1 if team_cap is None else 2,
        settings=Settings(list_timeout_s=8),
    )
    token = server.token if team_cap is None else server.team_token("red", team_cap)
    answers: list[httpx.Response] = []

    def upload() -> None:
        with server.as_team(token) as http:
            body = {"suite": suite("import time; time.sleep(2)"), "model": FAUX}
            answers.append(http.post("/v1/jobs", json=body))

    threads = [threading.Thread(target=upload) for _ in range(4)]
    for thread in threads:
        thread.start()
    most = 0
    other_requests_answered = False
    while any(t.is_alive() for t in threads):
        now = len(list_containers(docker_client, _ours()))
        most = max(most, now)
        if now and not other_requests_answered:
            # While listings run and wait, other requests are served at once.
            assert httpx.get(f"{server.url}/healthz", timeout=5).status_code == 200
            assert server.http.get("/v1/jobs", timeout=5).status_code == 200
            other_requests_answered = any(t.is_alive() for t in threads)
        time.sleep(0.05)
    for thread in threads:
        thread.join()
    assert most == 1, f"{most} listing containers ran at once; the cap allows 1"
    assert other_requests_answered
    codes = sorted(r.status_code for r in answers)
    assert 201 in codes and set(codes) <= {201, 503}, [r.text for r in answers]
    for busy in (r for r in answers if r.status_code == 503):
        assert "none came free in 8 s" in busy.json()["detail"]


def test_listing_failures_say_why(start_server: Callable[..., Server]) -> None:
    server = start_server(settings=Settings(list_timeout_s=3))
    cases: list[tuple[dict[str, str], str]] = [
        (suite("import time; time.sleep(60)"), "the suite's import took longer than 3 s"),
        (suite("import os; os._exit(3)"), "exited with code 3"),
        (suite(case_id="x" * 201), "is 201 characters long; the store keeps at most 200"),
        (suite(case_id="bad\x00id"), "contains the control character '\\x00'"),
        (suite(case_id="bell\x07"), "Case id 'bell\\x07' contains the control character"),
    ]
    for uploaded, message in cases:
        response = server.http.post("/v1/jobs", json={"suite": uploaded, "model": FAUX})
        assert response.status_code == 422, response.text
        detail = response.json()["detail"][0]
        assert detail["loc"] == ["body", "suite"] and message in detail["msg"], detail


def test_simulated_needs_a_solution_script(start_server: Callable[..., Server]) -> None:
    server = start_server()
    no_solution = suite().copy()
    no_solution["source"] = no_solution["source"].replace('"solution"', '"other"')
    body = {"suite": no_solution, "model": {"provider": "simulated", "id": "coin?p=0.5"}}
    response = server.http.post("/v1/jobs", json=body)
    assert response.status_code == 422, response.text
    detail = response.json()["detail"][0]
    assert detail["loc"] == ["body", "model", "id"]
    assert "Case only has no 'solution' script" in detail["msg"]
    # With the script the same model is accepted.
    body["suite"] = suite()
    assert server.http.post("/v1/jobs", json=body).status_code == 201


@pytest.fixture
def killed_plane_leftovers(docker_client: docker.DockerClient) -> Iterator[list[str]]:
    """Owner prefixes of planes the test kills; their containers go if the test fails."""
    owners: list[str] = []
    yield owners
    for owner in owners:
        for container in list_containers(docker_client, owner):
            container.remove(force=True)


def test_a_killed_planes_listing_container_is_reaped_by_the_next(
    tmp_path: Path,
    sandbox_image: str,
    docker_client: docker.DockerClient,
    killed_plane_leftovers: list[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    database, log, port = tmp_path / "examhall.db", tmp_path / "serve.log", free_port()
    token = f"exh_list_{uuid.uuid4().hex}"
    monkeypatch.setenv("EXAMHALL_LIST_TIMEOUT_S", "120")
    process = serve_process(f"sqlite:///{database}", port, log, token=token, max_containers=1)
    monkeypatch.delenv("EXAMHALL_LIST_TIMEOUT_S")
    try:
        wait_healthy(process, port, log)
        owner = f"{socket.gethostname()}:{process.pid}:"
        killed_plane_leftovers.append(owner)

        def upload() -> None:
            body = {"suite": suite("import time; time.sleep(300)"), "model": FAUX}
            headers = {"Authorization": f"Bearer {token}"}
            try:
                url = f"http://127.0.0.1:{port}/v1/jobs"
                httpx.post(url, json=body, headers=headers, timeout=60)
            except httpx.TransportError:
                pass  # the plane is killed under it

        uploader = threading.Thread(target=upload, daemon=True)
        uploader.start()
        deadline = time.monotonic() + 60
        while not list_containers(docker_client, owner):
            assert time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.1)
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=30)
    assert list_containers(docker_client, owner), "the killed plane's listing container is gone"
    # The next plane on the store removes it as it starts (recovery), not only its own.
    successor = serve(f"sqlite:///{database}")
    try:
        assert not list_containers(docker_client, owner)
    finally:
        successor.stop()
