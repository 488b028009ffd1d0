"""Reviews in the store, on SQLite and PostgreSQL: the report's agreement comes from the
newest review of each sampled trial, and a review invalidates the cached report."""

from __future__ import annotations

from sqlalchemy.orm import Session, sessionmaker

from sandbox.protocol import JudgeScore, TrialResult
from service.launch.trial import TrialRecord
from service.report.from_store import job_report
from service.report.model import Report, report_json
from service.report.render_text import render_text
from service.review.sampling import draw
from service.scheduler import Scheduler
from service.store import reviews
from service.store.models import Job
from tests.store.conftest import submit


def _report(sessions: sessionmaker[Session], job_id: str) -> Report:
    with sessions() as session:
        return job_report(session, session.get_one(Job, job_id))


def _review(sessions: sessionmaker[Session], job_id: str, trial_id: str, verdict: str) -> None:
    with sessions.begin() as session:
        reviews.add_review(
            session,
            job_id=job_id,
            trial_id=trial_id,
            verdict=verdict,
            note="",
            reviewer="ann",
            team="red",
            token_prefix=None,
            via="api",
        )


def test_reviews_reach_the_report_and_replace_the_cached_one(
    sessions: sessionmaker[Session], scheduler: Scheduler
) -> None:
    job = submit(sessions, cases=["create-greeting", "fix-config", "count-lines"])
    claimed = [trial_id for trial_id, _ in scheduler.claim(3)]
    outcomes = ["passed", "failed", "passed"]
    for trial_id, outcome in zip(claimed, outcomes, strict=True):
        score = 1.0 if outcome == "passed" else 0.0
        judged = [JudgeScore("file_equals", score), JudgeScore("lenient", 1.0, "always")]
        scheduler.record(
            trial_id, TrialRecord(trial_id, TrialResult(outcome, score, judges=judged))
        )
    plain = _report(sessions, job.id)
    assert plain.agreement is None and "agreement" not in report_json(plain)
    assert "Human review" not in render_text(plain)

    with sessions.begin() as session:
        candidates = reviews.scored_candidates(session, job.id)
        drawn = draw(candidates, 3, seed=8)
        reviews.add_sample(session, job.id, 3, 8, [c.trial_id for c in drawn], "red")
    # A sample alone is no review: the cached report stands.
    assert _report(sessions, job.id) is plain

    by_id = {c.trial_id: c for c in candidates}
    # People fail everything; the first trial is revised from pass to fail.
    _review(sessions, job.id, claimed[0], "pass")
    _review(sessions, job.id, claimed[0], "fail")
    _review(sessions, job.id, claimed[1], "fail")
    reviewed = _report(sessions, job.id)
    assert reviewed is not plain and reviewed.agreement is not None
    assert reviewed.variants == plain.variants
    rows = {row.judge: row for row in reviewed.agreement.rows}
    verdict, lenient = rows[None], rows["lenient"]
    assert verdict.reviewed == 2 and by_id[claimed[0]].outcome == "passed"
    assert verdict.confusion.human_fail_judge_pass == 1
    assert verdict.confusion.human_fail_judge_fail == 1
    assert lenient.confusion.human_fail_judge_pass == 2 and lenient.judge_pass_rate == 1.0
    assert "Human review: 2 of 3 sampled trials reviewed" in render_text(reviewed)
    assert _report(sessions, job.id) is reviewed
