"""Judge kinds in real trials: trace, structured and weighted judges of evals/judges_demo.py
score what the agent did in a real container, and every judge's own score is kept."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from service.launch.trial import TrialRecord

pytestmark = pytest.mark.docker

SUITE = "evals/judges_demo.py"


def test_trace_judges_fail_a_right_file_made_the_wrong_way(
    trial: Callable[..., TrialRecord],
) -> None:
    done = trial(SUITE, "debug-off", "faux/solution").result
    assert (done.outcome, done.score) == ("passed", 1.0)
    shell = trial(SUITE, "debug-off", "faux/shell").result
    assert shell.outcome == "failed" and shell.error_kind is None
    judges = {j.name: j for j in shell.judges}
    assert judges["file_contains(config.ini)"].score == 1.0
    assert judges["no shell"].score == 0.0
    assert judges["no shell"].detail.startswith("bash() matched call #1 bash(")
    assert judges["read then edit"].detail.startswith("2 of 2 missing; first missing: read(")


def test_a_weighted_rule_passes_a_trial_one_judge_failed(
    trial: Callable[..., TrialRecord],
) -> None:
    result = trial(SUITE, "ledger-totals", "faux/sloppy").result
    assert result.outcome == "passed" and result.score == pytest.approx(0.9)
    answer = next(j for j in result.judges if j.name == "answer")
    assert (answer.score, answer.detail) == (
        0.5,
        "1 of 2 differ: largest: expected 'rent', got 'food'",
    )


def test_a_fact_function_that_raises_on_the_agents_work_fails_the_trial(
    trial: Callable[..., TrialRecord],
) -> None:
    result = trial(SUITE, "ledger-totals", "faux/idle").result
    assert (result.outcome, result.error_kind) == ("error", "agent_error")
    assert "Judge totals.json could not score the agent's work" in (result.error_message or "")
    # Kept as that judge's failure, so its own pass rate counts it.
    assert [(j.name, j.score) for j in result.judges] == [("totals.json", 0.0)]
