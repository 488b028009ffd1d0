"""Live progress (server-sent events and `examhall submit`), cancelling, and /metrics."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import docker
import httpx
import pytest

from examhall import Client
from service.backends.docker import LABEL_JOB, DockerBackend, DockerSettings
from service.report.model import Report
from tests.docker.conftest import Server

pytestmark = pytest.mark.docker

SLOW: dict[str, Any] = {
    "suite": {"name": "slow", "source": Path("tests/suites/slow.py").read_text()},
    "model": {"provider": "faux", "id": "solution"},
}
COIN: dict[str, Any] = {"suite": "smoke", "model": {"provider": "simulated", "id": "coin?p=0.5"}}


def test_the_stream_tells_every_trial_and_ends_with_the_job(start_server: Any) -> None:
    server: Server = start_server()
    job = server.submit(**COIN, rounds=2, seed=3)
    client = Client(server.url, server.token)
    events = [(followed.event, followed.data) for followed in client.follow(job["id"])]
    client.close()

    kinds = [event for event, _ in events]
    assert kinds[-1] == "end" and events[-1][1] == {"status": "finished"}
    trials = server.http.get(f"/v1/jobs/{job['id']}/trials").json()
    told = [data for event, data in events if event == "trial"]
    # Each trial is told when it finished, with what the API says of it afterwards.
    finished = {d["id"]: d["outcome"] for d in told if d["status"] == "finished"}
    assert finished == {t["id"]: t["outcome"] for t in trials}
    assert {d["id"] for d in told if d["status"] == "running"} <= set(finished)
    counts = [data for event, data in events if event == "counts"]
    done = [c["finished"] for c in counts]
    assert done == sorted(done) and done[-1] == job["planned_trials"] == 8
    assert counts[-1]["passed"] == sum(t["outcome"] == "passed" for t in trials)
    # The last report event carries the final report's numbers.
    summary = [data for event, data in events if event == "report"][-1]
    report = server.http.get(f"/v1/jobs/{job['id']}/report").json()
    variant = report["variants"][0]
    assert summary["variants"][variant["name"]]["pass_at_1"] == {
        "value": variant["pass_at_1"]["value"],
        "ci95": variant["pass_at_1"]["ci95"],
    }


def test_examhall_submit_follows_the_stream_and_prints_the_report(
    start_server: Any, tmp_path: Path
) -> None:
    server: Server = start_server()
    env = {**os.environ, "EXAMHALL_SERVER": server.url, "EXAMHALL_TOKEN": server.token}
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "service.cli",
            "submit",
            "tests/suites/slow.py",
            "--model",
            "faux/solution",
            "--rounds",
            "2",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    job_id = result.stderr.split("Submitted ", 1)[1].split(":")[0]
    bars = [line for line in result.stderr.splitlines() if line.startswith("[")]
    # A bar per change, ending full; the suite file was uploaded under its file name.
    assert bars[-1].startswith("[" + "#" * 30 + "] 4/4 trials")
    assert len(bars) >= 3
    report = server.http.get(f"/v1/jobs/{job_id}/report", params={"format": "text"}).text

    def body(text: str) -> list[str]:  # all but the time it was generated
        return [line for line in text.splitlines() if "generated" not in line]

    assert body(result.stdout) == body(report) and "pass@1" in result.stdout
    assert server.http.get(f"/v1/jobs/{job_id}").json()["suite"] == "slow"

    bad = subprocess.run(
        [sys.executable, "-m", "service.cli", "submit", "smoke", "--token", "exh_wrong"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode == 2 and "HTTP 401" in bad.stderr


def test_cancel_drops_queued_stops_running_and_keeps_finished(
    start_server: Any, docker_client: docker.DockerClient
) -> None:
    server: Server = start_server(max_containers=2)
    job = server.submit(**SLOW, rounds=6)  # 12 trials of ~3 s, two at a time

    def trials() -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = server.http.get(f"/v1/jobs/{job['id']}/trials").json()
        return result

    deadline = time.monotonic() + 120
    while not (
        any(t["status"] == "finished" for t in trials())
        and any(t["status"] == "running" for t in trials())
        and docker_client.containers.list(filters={"label": f"{LABEL_JOB}={job['id']}"})
    ):
        assert time.monotonic() < deadline, "no trial finished while another ran"
        time.sleep(0.1)

    cancelled = server.http.delete(f"/v1/jobs/{job['id']}")
    assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"
    assert server.wait(job["id"])["status"] == "cancelled"
    deadline = time.monotonic() + 30
    while any(t["status"] != "finished" for t in trials()):
        assert time.monotonic() < deadline, "running trials were not stopped"
        time.sleep(0.1)
    kept = trials()
    # Only what finished before the cancel is kept, and it is whole.
    assert 1 <= len(kept) < 12
    assert all(t["outcome"] == "passed" and t["artifacts"] for t in kept)
    assert not docker_client.containers.list(
        all=True, filters={"label": f"{LABEL_JOB}={job['id']}"}
    )
    report = server.http.get(f"/v1/jobs/{job['id']}/report").json()
    Report.model_validate(report)
    assert report["variants"][0]["scored_trials"] == len(kept)
    assert report["status"] == "cancelled"
    assert f"was cancelled: {len(kept)} of 12 planned trials finished" in " ".join(report["notes"])
    # Cancelling again changes nothing; a finished job cannot be cancelled.
    assert server.http.delete(f"/v1/jobs/{job['id']}").json()["counts"]["finished"] == len(kept)
    done = server.submit(**COIN, cases=["create-greeting"])
    server.wait(done["id"])
    conflict = server.http.delete(f"/v1/jobs/{done['id']}")
    assert conflict.status_code == 409 and "finished" in conflict.json()["detail"]


def test_metrics_count_what_the_store_holds(start_server: Any) -> None:
    server: Server = start_server()
    job = server.submit(**COIN, rounds=3, seed=11)
    server.wait(job["id"])
    trials = server.http.get(f"/v1/jobs/{job['id']}/trials").json()
    text = server.http.get("/metrics")
    assert text.headers["content-type"].startswith("text/plain; version=0.0.4")
    samples = {
        line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1])
        for line in text.text.splitlines()
        if line and not line.startswith("#")
    }
    for outcome in ("passed", "failed", "error"):
        expected = sum(t["outcome"] == outcome for t in trials)
        assert samples[f'examhall_trials_total{{outcome="{outcome}"}}'] == expected
    assert samples["examhall_queue_depth"] == 0
    assert samples["examhall_containers_running"] == 0
    assert samples['examhall_jobs{status="finished"}'] == 1
    # One box, one node: the engine, ready, with no trial running now.
    assert samples['examhall_nodes{state="ready"}'] == 1
    assert samples['examhall_nodes{state="down"}'] == 0
    assert [v for k, v in samples.items() if k.startswith("examhall_node_trials{")] == [0]
    walls = [t["wall_s"] for t in trials]
    assert samples["examhall_trial_duration_seconds_count"] == len(trials) == 12
    assert samples["examhall_trial_duration_seconds_sum"] == pytest.approx(sum(walls), rel=1e-6)
    assert samples['examhall_trial_duration_seconds_bucket{le="2.5"}'] == sum(
        w <= 2.5 for w in walls
    )
    assert samples['examhall_trial_duration_seconds_bucket{le="+Inf"}'] == len(trials)


def test_healthz_says_which_dependency_is_down(
    start_server: Any, docker_client: docker.DockerClient, sandbox_image: str
) -> None:
    made: list[DockerBackend] = []

    def backend() -> DockerBackend:
        made.append(DockerBackend(DockerSettings(sandbox_image), docker_client))
        return made[-1]

    server: Server = start_server(make_backend=backend)
    assert httpx.get(f"{server.url}/healthz").status_code == 200
    # The engine goes away under a running control plane (its socket is gone).
    made[0].client = docker.DockerClient(base_url="unix:///nonexistent.sock", version="1.41")
    try:
        response = httpx.get(f"{server.url}/healthz")
    finally:
        made[0].client = docker_client
    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "unavailable" and body["database"] == "ok"
    assert body["docker"].startswith("unreachable")
    assert [fault["kind"] for fault in body["faults"]] == ["engine_unreachable"]
