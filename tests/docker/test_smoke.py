"""Every smoke case passes when the agent does the work and fails when it does not."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from sandbox.protocol import MessageEvent, ToolCallEvent, ToolResultEvent
from service.launch.trial import TrialRecord

pytestmark = pytest.mark.docker

SMOKE_CASES = ["create-greeting", "fix-config", "count-lines", "notes-in-steps"]
WORKER_STEPS = [
    "start_as_root",
    "read_spec",
    "scrub_env",
    # The suite is imported only once the worker is the sandbox user.
    "drop_privileges",
    "load_bundle",
    "seed_workspace",
    "self_check",
    "run_agent",
    "judge",
]


@pytest.mark.parametrize("case_id", SMOKE_CASES)
def test_case_passes_when_the_work_is_done(trial: Callable[..., TrialRecord], case_id: str) -> None:
    record = trial("evals/smoke.py", case_id, "faux/solution")
    result = record.result
    assert (result.outcome, result.error_message) == ("passed", None)
    assert result.score == 1.0
    assert all(j.score == 1.0 for j in result.judges) and result.judges
    assert record.steps == WORKER_STEPS
    # A clean exit: no abort at interpreter shutdown, nothing on stderr.
    assert record.sandbox is not None
    assert (record.sandbox.exit_code, record.sandbox.stderr_tail) == (0, "")
    assert result.tool_calls == sum(isinstance(e, ToolCallEvent) for e in record.events) > 0
    # Every tool call has its result, and the transcript ends with the assistant's answer.
    calls = {e.id for e in record.events if isinstance(e, ToolCallEvent)}
    assert calls == {e.tool_call_id for e in record.events if isinstance(e, ToolResultEvent)}
    last = [e for e in record.events if isinstance(e, MessageEvent)][-1]
    assert last.role == "assistant" and last.content == result.final_text
    assert result.usage.requests == sum(
        isinstance(e, MessageEvent) and e.role == "assistant" for e in record.events
    )


@pytest.mark.parametrize("case_id", SMOKE_CASES)
def test_case_fails_when_the_work_is_not_done(
    trial: Callable[..., TrialRecord], case_id: str
) -> None:
    record = trial("evals/smoke.py", case_id, "faux/idle")
    assert record.result.outcome == "failed"
    assert record.result.score is not None and record.result.score < 1.0
    assert record.result.error_kind is None


def test_session_artifact_is_the_transcript(trial: Callable[..., TrialRecord]) -> None:
    record = trial("evals/smoke.py", "count-lines", "faux/solution")
    lines = record.artifacts["session.jsonl"].decode().splitlines()
    assert [json.loads(line)["type"] for line in lines] == [e.type for e in record.events]
    # The scripted step that reacts to the request wrote what the read tool returned.
    write = next(e for e in record.events if isinstance(e, ToolCallEvent) and e.name == "write")
    assert write.arguments["content"] == "7\n"


def test_simulated_coin_is_seeded_and_replays_the_solution(
    trial: Callable[..., TrialRecord],
) -> None:
    outcomes = [
        trial(
            "evals/smoke.py", "create-greeting", "simulated/coin?p=0.5", seed=3, round=r
        ).result.outcome
        for r in range(1, 7)
    ]
    again = [
        trial(
            "evals/smoke.py", "create-greeting", "simulated/coin?p=0.5", seed=3, round=r
        ).result.outcome
        for r in range(1, 7)
    ]
    assert outcomes == again
    assert set(outcomes) == {"passed", "failed"}, "p=0.5 over 6 seeded rounds gave one side"
