"""Model-graded judges in real trials: the job's judge model (the simulated grader, which
answers in the control plane by a rule these tests assert on) is reached through the judge
gateway, in relay and direct mode, never with a key in the sandbox; its calls are recorded;
its failures alone leave a trial unscored, and what the agent writes cannot."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from tests.docker.conftest import Server
from tests.docker.test_direct import _received, direct_box  # noqa: F401  (a fixture)

pytestmark = pytest.mark.docker

GRADER = {"provider": "simulated", "id": "grader?pass_if=Paris"}


def _run(server: Server, **body: Any) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    created = server.submit(suite="judges_demo", cases=["capital"], **body)
    server.wait(created["id"])
    trials = server.http.get(f"/v1/jobs/{created['id']}/trials").json()
    report = server.http.get(f"/v1/jobs/{created['id']}/report").json()
    return trials, report


def test_the_judge_model_grades_through_the_gateway_and_is_recorded(
    start_server: Callable[..., Server],
) -> None:
    server = start_server()
    [trial], report = _run(server, model={"provider": "faux", "id": "solution"}, judge_model=GRADER)
    assert (trial["outcome"], trial["score"]) == ("passed", 1.0), trial["error_message"]
    assert [(j["name"], j["score"]) for j in trial["judges"]] == [
        ("names Paris", 1.0),
        ("one sentence", 1.0),
    ]
    assert trial["judges"][0]["detail"].startswith("VERDICT PASS: ")
    # Each call as the control plane sent and got it: the prompt with the fenced answer, the
    # answer, its verdict, usage and cost; and the judge model's usage apart from the agent's.
    lines = server.http.get(f"/v1/trials/{trial['id']}/artifacts/judge_model.jsonl").text
    calls = [json.loads(line) for line in lines.splitlines()]
    assert [c["verdict"] for c in calls] == ["PASS", "PASS"]
    prompt = calls[0]["prompt"]["messages"][0]["content"]
    assert "The answer names Paris" in prompt and "\nThe capital of France is Paris.\n" in prompt
    assert calls[0]["answer"].endswith("VERDICT: PASS") and calls[0]["usage"]["requests"] == 1
    assert trial["usage"]["judge"]["requests"] == 2
    assert trial["usage"]["requests"] == 1  # the agent's own
    events = server.http.get(f"/v1/trials/{trial['id']}/events").json()
    generations = [e for e in events if e["payload"].get("step") == "judge_generation"]
    assert len(generations) == 2 and "verdict PASS" in generations[0]["payload"]["detail"]
    record = report["record"]
    assert record["judge_model"] == "simulated/grader?pass_if=Paris"
    assert [r["judge"] for r in record["judge_rubrics"]] == ["names Paris", "one sentence"]
    assert all(len(r["rubric_sha256"]) == 64 for r in record["judge_rubrics"])
    assert [(j["name"], j["passed"], j["scored"]) for j in report["variants"][0]["judges"]] == [
        ("names Paris", 1, 1),
        ("one sentence", 1, 1),
    ]


def test_an_answer_that_talks_the_grader_round_fails_and_is_scored(
    start_server: Callable[..., Server],
) -> None:
    server = start_server()
    [trial], report = _run(server, model={"provider": "faux", "id": "inject"}, judge_model=GRADER)
    assert (trial["outcome"], trial["error_kind"]) == ("failed", None)
    assert trial["judges"][0]["detail"] == "The judge model's answer has no verdict line: 'banana'"
    assert report["variants"][0]["scored_trials"] == 1


def test_a_failing_judge_model_is_a_judge_error_retried_and_unscored(
    start_server: Callable[..., Server],
) -> None:
    server = start_server()
    trials, report = _run(
        server,
        model={"provider": "faux", "id": "solution"},
        judge_model={"provider": "simulated", "id": "grader?fail=provider"},
        max_infra_retries=1,
    )
    assert [(t["attempt"], t["error_kind"]) for t in trials] == [
        (1, "judge_error"),
        (2, "judge_error"),
    ]
    assert "The judge model failed: simulated/grader?fail=provider" in trials[0]["error_message"]
    [variant] = report["variants"]
    assert (variant["scored_trials"], variant["outcomes"]["excluded"]) == (0, 1)
    assert variant["outcomes"]["retried_attempts"] == 1


def test_an_exhausted_judge_budget_is_a_judge_error(start_server: Callable[..., Server]) -> None:
    server = start_server()
    [trial], _ = _run(
        server,
        model={"provider": "faux", "id": "solution"},
        judge_model=GRADER,
        judge_limits={"max_requests": 1},
        max_infra_retries=0,
    )
    assert trial["error_kind"] == "judge_error"
    assert "judge budget: The trial used its budget of 1 model requests" in trial["error_message"]


def test_a_judge_error_no_gateway_saw_is_a_failed_run(start_server: Callable[..., Server]) -> None:
    """A job without a judge model: the model-graded judge cannot grade, and the worker's
    judge_error is one the control plane never saw, so the trial fails instead."""
    server = start_server()
    [trial], _ = _run(server, model={"provider": "faux", "id": "solution"}, max_infra_retries=1)
    assert (trial["attempt"], trial["error_kind"]) == (1, "agent_error")
    assert "names no judge_model" in trial["error_message"]
    assert "saw no judge-model failure" in trial["error_message"]


def test_direct_mode_still_grades_through_the_control_plane(direct_box: Any, canary: str) -> None:  # noqa: F811
    server, provider = direct_box("graded", {"name": "ls", "arguments": {"path": "."}})
    [trial], _ = _run(
        server,
        model={"provider": "fakeai", "id": "gpt-direct"},
        credentials="direct",
        judge_model={"provider": "simulated", "id": "grader?pass_if=Done"},
    )
    assert trial["outcome"] == "passed", trial["error_message"]
    # The provider saw the agent's two requests only; the grader answered in the control plane.
    assert [r["auth"] for r in _received(provider)] == [f"Bearer {canary}"] * 2
    assert trial["usage"]["judge"]["requests"] == 2
    assert canary not in json.dumps(trial)


def test_a_bad_judge_model_is_refused_at_submission(start_server: Callable[..., Server]) -> None:
    server = start_server()
    for judge_model, field, says in (
        ({"provider": "nope", "id": "x"}, "provider", "unknown provider"),
        ({"provider": "faux", "id": "solution"}, "provider", "a judge model is simulated"),
        ({"provider": "simulated", "id": "coin?p=1"}, "id", "Unknown simulated judge model"),
    ):
        response = server.http.post(
            "/v1/jobs",
            json={
                "suite": "judges_demo",
                "model": {"provider": "faux", "id": "solution"},
                "judge_model": judge_model,
            },
        )
        assert response.status_code == 422, response.text
        [error] = response.json()["detail"]
        assert error["loc"] == ["body", "judge_model", field] and says in error["msg"]
