"""The control plane over real HTTP, with real SQLite and real Docker."""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from service.backends.base import LaunchSpec
from service.backends.docker import DockerBackend, DockerSettings
from service.report.model import Report
from tests.docker.conftest import Server

pytestmark = pytest.mark.docker

SMOKE = ["create-greeting", "fix-config", "count-lines", "notes-in-steps"]
GOOD: dict[str, Any] = {"suite": "smoke", "model": {"provider": "faux", "id": "solution"}}


def _rows(server: Server) -> tuple[int, int, int]:
    engine = sa.create_engine(server.database_url)
    with engine.connect() as connection:
        counts = tuple(
            connection.execute(sa.text(f"SELECT count(*) FROM {table}")).scalar_one()
            for table in ("jobs", "trials", "suites")
        )
    engine.dispose()
    return counts  # type: ignore[return-value]


BAD_INPUT = [
    ({**GOOD, "suite": "nope"}, ["body", "suite"], "Unknown suite 'nope'"),
    ({**GOOD, "cases": ["create-greeting", "nope"]}, ["body", "cases", 1], "Unknown case 'nope'"),
    ({**GOOD, "cases": []}, ["body", "cases"], "at least one case"),
    ({**GOOD, "rounds": 0}, ["body", "rounds"], "greater than or equal to 1"),
    ({**GOOD, "rounds": 2.5}, ["body", "rounds"], "valid integer"),
    ({**GOOD, "rounds": "3"}, ["body", "rounds"], "valid integer"),
    ({**GOOD, "rounds": True}, ["body", "rounds"], "valid integer"),
    ({**GOOD, "limits": {"timeout_s": 0}}, ["body", "limits", "timeout_s"], "positive finite"),
    ({**GOOD, "limits": {"timeout_s": -5}}, ["body", "limits", "timeout_s"], "positive finite"),
    ({**GOOD, "limits": {"timeout_s": "inf"}}, ["body", "limits", "timeout_s"], "valid number"),
    ({**GOOD, "limits": {"timeout_s": True}}, ["body", "limits", "timeout_s"], "valid"),
    ({**GOOD, "limits": {"timeout_s": "5"}}, ["body", "limits", "timeout_s"], "valid"),
    ({**GOOD, "limits": {"timeout_s": 1e308}}, ["body", "limits", "timeout_s"], "at most 86400"),
    ({**GOOD, "seed": 10**23}, ["body", "seed"], "less than or equal to"),
    ({**GOOD, "seed": -1}, ["body", "seed"], "greater than or equal to 0"),
    ({**GOOD, "model": {"provider": "faux"}}, ["body", "model", "id"], "Field required"),
    ({**GOOD, "model": {"id": "x"}}, ["body", "model", "provider"], "Field required"),
    (
        {**GOOD, "model": {"provider": "acme", "id": "x"}},
        ["body", "model", "provider"],
        "unknown provider",
    ),
    ({"model": GOOD["model"]}, ["body", "suite"], "Field required"),
    (
        {**GOOD, "suite": {"name": "broken", "source": "CASES = [1/0]"}},
        ["body", "suite"],
        "ZeroDivisionError",
    ),
]


def test_bad_input_is_422_naming_the_field_and_writes_nothing(
    start_server: Callable[..., Server],
) -> None:
    server = start_server()
    before = _rows(server)
    for body, loc, message in BAD_INPUT:
        response = server.http.post("/v1/jobs", json=body)
        assert response.status_code == 422, (body, response.text)
        details = response.json()["detail"]
        assert any(d["loc"] == loc and message in d["msg"] for d in details), (loc, details)
    assert _rows(server) == before


def test_nan_and_infinity_are_422_not_500(start_server: Callable[..., Server]) -> None:
    server = start_server()
    for literal in ("NaN", "Infinity", "-Infinity"):
        body = '{"suite": "smoke", "model": {"provider": "faux", "id": "solution"}, '
        body += f'"limits": {{"timeout_s": {literal}}}}}'
        response = server.http.post(
            "/v1/jobs", content=body, headers={"content-type": "application/json"}
        )
        assert response.status_code == 422, (literal, response.text)
        assert response.json()["detail"][0]["loc"] == ["body", "limits", "timeout_s"]


def test_unknown_ids_are_404(start_server: Callable[..., Server]) -> None:
    server = start_server()
    for path in (
        "/v1/jobs/job-nope",
        "/v1/jobs/job-nope/trials",
        "/v1/jobs/job-nope/report",
        "/v1/trials/trial-nope",
        "/v1/trials/trial-nope/events",
        "/v1/trials/trial-nope/artifacts/session.jsonl",
    ):
        assert server.http.get(path).status_code == 404, path


def test_smoke_job_end_to_end(start_server: Callable[..., Server]) -> None:
    server = start_server(max_containers=2)
    created = server.submit(
        suite="smoke", model={"provider": "simulated", "id": "coin?p=0.6"}, rounds=3, seed=11
    )
    assert created["planned_trials"] == len(SMOKE) * 3
    job = server.wait(created["id"])
    trials = server.http.get(f"/v1/jobs/{created['id']}/trials").json()
    assert len(trials) == job["planned_trials"] == job["counts"]["finished"]
    # Planned order is round by round.
    assert [(t["round"], t["case_id"]) for t in trials] == [
        (r, c) for r in (1, 2, 3) for c in SMOKE
    ]

    report = server.http.get(f"/v1/jobs/{created['id']}/report").json()
    variant = report["variants"][0]
    Report.model_validate(report)  # the documented shape

    stored_passes = sum(t["outcome"] == "passed" for t in trials)
    assert variant["outcomes"]["passed"] == stored_passes
    assert variant["outcomes"]["passed"] + variant["outcomes"]["failed"] == len(trials)
    assert variant["scored_trials"] == len(trials)
    by_case = {row["case"]: row for row in variant["cases"]}
    for case_id in SMOKE:
        runs = [t["outcome"] == "passed" for t in trials if t["case_id"] == case_id]
        assert (by_case[case_id]["n"], by_case[case_id]["passes"]) == (3, sum(runs))
        assert by_case[case_id]["pass_hat_k"] == float(all(runs))
    assert variant["pass_at_1"]["value"] == pytest.approx(stored_passes / len(trials))
    low, high = variant["pass_at_1"]["ci95"]
    assert low <= variant["pass_at_1"]["value"] <= high
    record = report["record"]
    assert record["k"] == 3 and record["seed"] == 11 and record["cases"] == SMOKE
    assert record["model_requested"] == "simulated/coin?p=0.6"
    assert record["image_digest"].startswith("sha256:")
    assert len(record["suite_sha256"]) == 64

    passed = next(t for t in trials if t["outcome"] == "passed")
    events = server.http.get(f"/v1/trials/{passed['id']}/events").json()
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert sum(e["type"] == "tool_call" for e in events) == passed["tool_calls"] > 0
    session = server.http.get(f"/v1/trials/{passed['id']}/artifacts/session.jsonl")
    assert session.status_code == 200
    assert [json.loads(line)["type"] for line in session.text.splitlines()] == [
        e["type"] for e in events
    ]
    text = server.http.get(f"/v1/jobs/{created['id']}/report", params={"format": "text"}).text
    assert "pass@1" in text and "pass^3" in text and created["id"] in text


def test_one_round_says_it_cannot_establish_stability(start_server: Callable[..., Server]) -> None:
    server = start_server()
    created = server.submit(**GOOD, cases=["create-greeting"])
    server.wait(created["id"])
    report = server.http.get(f"/v1/jobs/{created['id']}/report").json()
    assert any("One repetition cannot establish stability" in n for n in report["notes"])
    variant = report["variants"][0]
    assert variant["pass_at_1"]["value"] == 1.0
    assert (
        variant["pass_at_1"]["ci95"] is None
        and "at least 2 cases" in variant["pass_at_1"]["reason"]
    )


class _NoImageForTrials(DockerBackend):
    """Case listing works; every trial container names an image the engine lacks, so the
    real daemon refuses to create it: an infrastructure fault, as a missing image would be."""

    def container_config(self, launch: LaunchSpec) -> dict[str, Any]:
        config = super().container_config(launch)
        if launch.trial_id.startswith("trial-"):
            config["image"] = "examhall/no-such-image:0"
        return config


def test_infra_errors_are_retried_kept_and_excluded(
    start_server: Callable[..., Server], docker_client: Any, sandbox_image: str
) -> None:
    server = start_server(
        make_backend=lambda: _NoImageForTrials(DockerSettings(image=sandbox_image), docker_client)
    )
    created = server.submit(**GOOD, cases=["create-greeting", "fix-config"], max_infra_retries=2)
    job = server.wait(created["id"])
    trials = server.http.get(f"/v1/jobs/{created['id']}/trials").json()
    # Every attempt is kept: 2 planned trials x (1 + 2 retries).
    assert len(trials) == 6 == job["counts"]["attempts"]
    # Counts are of planned trials by their latest attempt: a retry never counts twice.
    assert (job["planned_trials"], job["counts"]["finished"], job["counts"]["error"]) == (2, 2, 2)
    assert sorted((t["case_id"], t["attempt"]) for t in trials) == [
        (c, a) for c in ("create-greeting", "fix-config") for a in (1, 2, 3)
    ]
    assert {t["error_kind"] for t in trials} == {"infra_error"}
    assert all("could not start" in t["error_message"] for t in trials)
    variant = server.http.get(f"/v1/jobs/{created['id']}/report").json()["variants"][0]
    assert variant["outcomes"]["excluded"] == 2
    assert variant["outcomes"]["attempts"] == 6 and variant["outcomes"]["retried_attempts"] == 4
    assert variant["scored_trials"] == 0
    assert variant["pass_at_1"]["value"] is None and variant["pass_at_1"]["reason"]


def test_at_most_max_containers_run_at_once_in_planned_order(
    start_server: Callable[..., Server],
) -> None:
    server = start_server(max_containers=1)
    created = server.submit(**GOOD, rounds=2)
    server.wait(created["id"])
    trials = server.http.get(f"/v1/jobs/{created['id']}/trials").json()
    by_start = sorted(trials, key=lambda t: t["started_at"])
    assert [t["order"] for t in by_start] == list(range(len(trials)))
    for earlier, later in itertools.pairwise(by_start):
        assert earlier["finished_at"] <= later["started_at"], "two trials overlapped"


def test_openapi_documents_every_route(start_server: Callable[..., Server]) -> None:
    server = start_server()
    schema = server.http.get("/openapi.json").json()
    assert set(schema["paths"]) >= {
        "/v1/jobs",
        "/v1/jobs/{job_id}",
        "/v1/jobs/{job_id}/trials",
        "/v1/jobs/{job_id}/report",
        "/v1/trials/{trial_id}",
        "/v1/trials/{trial_id}/events",
        "/v1/trials/{trial_id}/artifacts/{name}",
    }
    post = schema["paths"]["/v1/jobs"]["post"]
    assert {"201", "422"} <= set(post["responses"])


def _max_overlap(trials: list[dict[str, Any]]) -> int:
    moments = sorted(
        [(t["started_at"], 1) for t in trials] + [(t["finished_at"], -1) for t in trials],
        key=lambda m: (m[0], m[1]),  # an end before a start at the same instant
    )
    running = peak = 0
    for _, step in moments:
        running += step
        peak = max(peak, running)
    return peak


def test_max_containers_two_runs_two_at_once_never_three(
    start_server: Callable[..., Server],
) -> None:
    server = start_server(max_containers=2)
    created = server.submit(
        suite={"name": "slow", "source": Path("tests/suites/slow.py").read_text()},
        model={"provider": "faux", "id": "solution"},
        rounds=3,
    )
    server.wait(created["id"])
    trials = server.http.get(f"/v1/jobs/{created['id']}/trials").json()
    assert len(trials) == 6 and all(t["outcome"] == "passed" for t in trials)
    assert _max_overlap(trials) == 2
