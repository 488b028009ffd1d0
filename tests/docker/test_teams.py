"""Tokens and teams over real HTTP: who may see, cancel and run what."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from tests.docker.conftest import Server
from tests.docker.test_sessions import sign_in

pytestmark = pytest.mark.docker

SLOW: dict[str, Any] = {
    "suite": {"name": "slow", "source": Path("tests/suites/slow.py").read_text()},
    "model": {"provider": "faux", "id": "solution"},
}
QUICK: dict[str, Any] = {
    "suite": "smoke",
    "cases": ["create-greeting"],
    "model": {"provider": "simulated", "id": "coin?p=1"},
}


def _a_finished_job(server: Server, http: Any) -> tuple[str, str]:
    response = http.post("/v1/jobs", json=QUICK)
    assert response.status_code == 201, response.text
    job_id = response.json()["id"]
    server.wait(job_id)
    trial_id = http.get(f"/v1/jobs/{job_id}/trials").json()[0]["id"]
    return job_id, trial_id


def test_every_api_route_needs_a_valid_token(start_server: Any) -> None:
    server: Server = start_server()
    job_id, trial_id = _a_finished_job(server, server.http)
    routes = [
        ("GET", "/v1/jobs"),
        ("POST", "/v1/jobs"),
        ("GET", f"/v1/jobs/{job_id}"),
        ("DELETE", f"/v1/jobs/{job_id}"),
        ("GET", f"/v1/jobs/{job_id}/stream"),
        ("GET", f"/v1/jobs/{job_id}/trials"),
        ("GET", f"/v1/jobs/{job_id}/report"),
        ("GET", f"/v1/trials/{trial_id}"),
        ("GET", f"/v1/trials/{trial_id}/events"),
        ("GET", f"/v1/trials/{trial_id}/artifacts/session.jsonl"),
        ("GET", "/metrics"),
    ]
    with httpx.Client(base_url=server.url, timeout=30) as anonymous:
        for method, path in routes:
            for headers in ({}, {"Authorization": "Bearer exh_not_a_real_token"}):
                response = anonymous.request(method, path, headers=headers, json=QUICK)
                assert response.status_code == 401, (method, path, headers, response.text)
                assert "token" in response.json()["detail"]
                assert response.headers["www-authenticate"].startswith("Bearer")
    # Nothing was created or cancelled by the rejected calls.
    assert len(server.http.get("/v1/jobs").json()) == 1
    assert server.http.get(f"/v1/jobs/{job_id}").json()["status"] == "finished"
    # /healthz is for load balancers and compose: no token, and no data beyond up or down
    # (of the store, the engine, and the machines trials run on: this one engine) and how
    # much disk the box's built images take (no name of any).
    health = httpx.get(f"{server.url}/healthz").json()
    cache = health.pop("image_cache")
    assert health == {
        "status": "ok",
        "database": "ok",
        "docker": "ok",
        "nodes": {"ready": 1, "drained": 0, "down": 0},
        "faults": [],
    }
    assert set(cache) == {"images", "bytes", "limit_bytes"}
    assert all(isinstance(value, int) for value in cache.values())


def test_a_team_sees_and_cancels_only_its_own_jobs(start_server: Any) -> None:
    server: Server = start_server()
    red, blue = server.as_team(server.team_token("red")), server.as_team(server.team_token("blue"))
    red_job, red_trial = _a_finished_job(server, red)
    blue_running = blue.post("/v1/jobs", json={**SLOW, "rounds": 2}).json()["id"]

    for path in (
        f"/v1/jobs/{red_job}",
        f"/v1/jobs/{red_job}/trials",
        f"/v1/jobs/{red_job}/report",
        f"/v1/jobs/{red_job}/stream",
        f"/v1/trials/{red_trial}",
        f"/v1/trials/{red_trial}/events",
        f"/v1/trials/{red_trial}/artifacts/session.jsonl",
    ):
        other, missing = blue.get(path), blue.get(path.replace(red_job, "job-nope"))
        # Another team's job answers exactly as a job that does not exist.
        assert other.status_code == 404, path
        if red_job in path:
            assert other.json() == {"detail": f"No job {red_job}."}
            assert missing.status_code == 404
    assert red.delete(f"/v1/jobs/{blue_running}").status_code == 404
    assert blue.get(f"/v1/jobs/{blue_running}").json()["status"] in ("queued", "running")
    # Teams list their own jobs; the admin lists everyone's, with the team named.
    assert [j["id"] for j in red.get("/v1/jobs").json()] == [red_job]
    assert [j["id"] for j in blue.get("/v1/jobs").json()] == [blue_running]
    everything = {j["id"]: j["team"] for j in server.http.get("/v1/jobs").json()}
    assert everything == {red_job: "red", blue_running: "blue"}
    # Team tokens are not admin tokens.
    assert red.get("/metrics").status_code == 404
    # The admin may cancel any team's job.
    assert server.http.delete(f"/v1/jobs/{blue_running}").json()["status"] == "cancelled"
    server.wait(blue_running)
    red.close()
    blue.close()


def test_admin_cli_creates_teams_and_tokens_stored_hashed(start_server: Any) -> None:
    server: Server = start_server()
    env = {**os.environ, "EXAMHALL_DATABASE_URL": server.database_url}

    def admin(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "service.cli", "admin", *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )

    assert admin("create-team", "green", "--max-containers", "2").returncode == 0
    duplicate = admin("create-team", "green")
    assert duplicate.returncode == 2 and "already exists" in duplicate.stderr
    assert "not allowed" in admin("create-team", "Bad Name!").stderr
    unknown = admin("create-token", "nobody")
    assert unknown.returncode == 2 and "No team 'nobody'" in unknown.stderr
    made = admin("create-token", "green")
    assert made.returncode == 0, made.stderr
    token = made.stdout.strip()
    assert token.startswith("exh_") and "shown only this once" in made.stderr

    with server.as_team(token) as green:
        job_id, _ = _a_finished_job(server, green)
        assert green.get(f"/v1/jobs/{job_id}").json()["team"] == "green"
    engine = sa.create_engine(server.database_url)
    with engine.connect() as connection:
        stored = connection.execute(sa.text("SELECT sha256, prefix FROM tokens")).all()
    engine.dispose()
    # Only the hash (and a short prefix to tell tokens apart) is kept, never the token.
    assert [row.sha256 for row in stored] == [hashlib.sha256(token.encode()).hexdigest()]
    assert token not in repr(stored) and token.startswith(stored[0].prefix)
    listing = admin("teams")
    assert "green" in listing.stdout and listing.stdout.split("green")[1].split()[:3] == [
        "2",
        "1",
        "1",
    ]

    assert admin("revoke-token", token[:14]).returncode == 0
    with server.as_team(token) as revoked:
        assert revoked.get("/v1/jobs").status_code == 401


def _max_overlap(intervals: list[tuple[float, float]]) -> int:
    points = sorted([(s, 1) for s, _ in intervals] + [(e, -1) for _, e in intervals])
    running = peak = 0
    for _, step in points:
        running += step
        peak = max(peak, running)
    return peak


def test_a_team_cap_limits_its_containers_but_not_other_teams(start_server: Any) -> None:
    server: Server = start_server(max_containers=3)
    capped = server.as_team(server.team_token("capped", max_containers=1))
    free = server.as_team(server.team_token("free"))
    capped_job = capped.post("/v1/jobs", json={**SLOW, "rounds": 2}).json()["id"]
    free_job = free.post("/v1/jobs", json={**SLOW, "rounds": 1}).json()["id"]
    server.wait(capped_job)
    server.wait(free_job)

    def spans(http: Any, job_id: str) -> list[tuple[float, float]]:
        trials = http.get(f"/v1/jobs/{job_id}/trials").json()
        assert all(t["outcome"] == "passed" for t in trials)
        return [(_seconds(t["started_at"]), _seconds(t["finished_at"])) for t in trials]

    capped_spans, free_spans = spans(capped, capped_job), spans(free, free_job)
    assert len(capped_spans) == 4 and len(free_spans) == 2
    # The capped team never ran two at once, though the box had room for three ...
    assert _max_overlap(capped_spans) == 1
    # ... and the other team's trials ran beside it rather than waiting behind it.
    assert _max_overlap(capped_spans + free_spans) >= 2
    capped.close()
    free.close()


def _seconds(stamp: str) -> float:
    return datetime.fromisoformat(stamp).timestamp()


def test_a_jobs_concurrency_paces_that_job_alone_within_its_teams_cap(
    start_server: Any,
) -> None:
    server: Server = start_server(max_containers=3)
    team = server.as_team(server.team_token("paced", max_containers=2))
    over = team.post("/v1/jobs", json={**SLOW, "concurrency": 3})
    assert over.status_code == 422
    assert "container cap (2)" in over.text and "concurrency 3" in over.text
    assert team.get("/v1/jobs").json() == []

    paced = team.post("/v1/jobs", json={**SLOW, "rounds": 2, "concurrency": 1}).json()["id"]
    beside = team.post("/v1/jobs", json={**SLOW, "rounds": 1}).json()["id"]
    server.wait(paced)
    server.wait(beside)
    assert team.get(f"/v1/jobs/{paced}").json()["concurrency"] == 1
    assert team.get(f"/v1/jobs/{beside}").json()["concurrency"] is None

    def spans(job_id: str) -> list[tuple[float, float]]:
        trials = team.get(f"/v1/jobs/{job_id}/trials").json()
        assert all(t["outcome"] == "passed" for t in trials)
        return [(_seconds(t["started_at"]), _seconds(t["finished_at"])) for t in trials]

    paced_spans, beside_spans = spans(paced), spans(beside)
    assert len(paced_spans) == 4
    # One at a time for the paced job, while the team's other job used the second slot.
    assert _max_overlap(paced_spans) == 1
    assert _max_overlap(paced_spans + beside_spans) == 2
    team.close()


def test_the_queue_by_team_is_on_metrics_and_each_team_sees_only_its_own_row(
    start_server: Any,
) -> None:
    server: Server = start_server(max_containers=1)
    blue = server.as_team(server.team_token("blue", share=3))
    green = server.as_team(server.team_token("green"))
    blue_job = blue.post("/v1/jobs", json={**SLOW, "rounds": 3}).json()["id"]
    green_job = green.post("/v1/jobs", json={**SLOW, "rounds": 2}).json()["id"]
    try:
        deadline = time.monotonic() + 120
        while "running" not in {
            http.get(f"/v1/jobs/{job}").json()["status"]
            for http, job in ((blue, blue_job), (green, green_job))
        }:
            assert time.monotonic() < deadline, "no trial started"
            time.sleep(0.2)
        metrics = server.http.get("/metrics").text
        depth = _samples(metrics, "examhall_team_queue_depth")
        running = _samples(metrics, "examhall_team_trials_running")
        shares = _samples(metrics, "examhall_team_share")
        # One slot: 10 trials planned, one running; the counts are the store's.
        assert sum(depth.values()) + sum(running.values()) == 10 and sum(running.values()) == 1
        assert shares == {"blue": 3, "green": 1}
        planned = {"blue": 6, "green": 4}
        for team in ("blue", "green"):
            assert depth[team] + running.get(team, 0) <= planned[team]

        page = sign_in(server, server.team_token("blue")).get("/ui/jobs").text
        assert '<td>blue</td><td class="num">3</td>' in page and "other teams" in page
        assert "green" not in page  # another team's name and share are the operator's
    finally:
        for http, job in ((blue, blue_job), (green, green_job)):
            http.post(f"/v1/jobs/{job}/cancel")
        blue.close()
        green.close()


def _samples(metrics: str, name: str) -> dict[str, int]:
    found = {}
    for line in metrics.splitlines():
        if line.startswith(name + "{"):
            labels, value = line.rsplit(" ", 1)
            found[labels.split('team="', 1)[1].split('"', 1)[0]] = int(float(value))
    return found
