"""Per-judge pass rates: counted by the database over the scored trials' last attempts, on
SQLite and PostgreSQL, and shown in the report beside the case's."""

from __future__ import annotations

from sqlalchemy.orm import Session, sessionmaker

from sandbox.protocol import JudgeScore, TrialResult
from service.launch.trial import TrialRecord
from service.report.from_store import job_report
from service.report.render_text import render_text
from service.scheduler import Scheduler
from service.store.models import Job
from service.store.reports import judge_counts
from tests.store.conftest import submit


def _judges(trace: float, facts: float) -> list[JudgeScore]:
    return [JudgeScore("trace", trace, "t"), JudgeScore("facts", facts, "f")]


def test_judge_pass_rates_count_each_scored_trials_last_attempt(
    sessions: sessionmaker[Session], scheduler: Scheduler
) -> None:
    job = submit(sessions, cases=["create-greeting", "fix-config", "count-lines"], rounds=2)
    claimed = [trial_id for trial_id, _ in scheduler.claim(6)]
    results = [
        TrialResult("passed", score=1.0, judges=_judges(1.0, 1.0)),
        # The weighted rule may pass a trial that one judge failed: each judge keeps its own.
        TrialResult("passed", score=0.8, judges=_judges(1.0, 0.5)),
        TrialResult("failed", score=0.0, judges=_judges(0.0, 0.0)),
        # A judge that raised on the agent's work: a failed run, its judges counted.
        TrialResult(
            "error",
            error_kind="agent_error",
            judges=[JudgeScore("trace", 1.0), JudgeScore("facts", 0.0)],
        ),
        # Unscored: counted nowhere.
        TrialResult("error", error_kind="judge_error", judges=_judges(1.0, 1.0)),
        TrialResult("error", error_kind="sandbox_error"),
    ]
    for trial_id, result in zip(claimed, results, strict=True):
        scheduler.record(trial_id, TrialRecord(trial_id, result))

    with sessions() as session:
        assert sorted(judge_counts(session, job.id)) == [
            ("default", "facts", 1, 4),
            ("default", "trace", 3, 4),
        ]
        report = job_report(session, session.get_one(Job, job.id))
    [variant] = report.variants
    assert [(j.name, j.passed, j.scored, j.pass_rate) for j in variant.judges] == [
        ("facts", 1, 4, 0.25),
        ("trace", 3, 4, 0.75),
    ]
    # Beside the case's rate, which follows each trial's own outcome.
    assert variant.pass_at_1.value is not None and variant.scored_trials == 4
    assert report.model_dump()["variants"][0]["judges"][1] == {
        "name": "trace",
        "passed": 3,
        "scored": 4,
        "pass_rate": 0.75,
    }
    text = render_text(report)
    assert "  trace" in text and "     4     3     75%" in text


def test_a_retried_attempt_counts_only_once(
    sessions: sessionmaker[Session], scheduler: Scheduler
) -> None:
    job = submit(sessions, cases=["create-greeting"], max_infra_retries=1)
    [(first, _)] = scheduler.claim(1)
    scheduler.record(
        first, TrialRecord(first, TrialResult("error", error_kind="infra_error", judges=[]))
    )
    [(second, _)] = scheduler.claim(1)
    scheduler.record(
        second, TrialRecord(second, TrialResult("failed", score=0.0, judges=_judges(1.0, 0.0)))
    )
    with sessions() as session:
        assert sorted(judge_counts(session, job.id)) == [
            ("default", "facts", 0, 1),
            ("default", "trace", 1, 1),
        ]
