"""Reviews in the store, on SQLite and PostgreSQL: the report's agreement comes from the
newest review of each trial of the sample of record, a review invalidates the cached report,
one sample of record per job at a time, and a redraw leaves the old reviews uncounted."""

from __future__ import annotations

import pytest
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from sandbox.protocol import JudgeScore, TrialResult
from service.launch.trial import TrialRecord
from service.report.from_store import job_report
from service.report.model import Report, report_json
from service.report.render_text import render_text
from service.review.sampling import draw
from service.scheduler import Scheduler
from service.store import reviews
from service.store.models import Job, ReviewSample
from tests.store.conftest import submit


def _report(sessions: sessionmaker[Session], job_id: str) -> Report:
    with sessions() as session:
        return job_report(session, session.get_one(Job, job_id))


def _review(
    sessions: sessionmaker[Session],
    job_id: str,
    trial_id: str,
    verdict: str,
    *,
    seen: bool = False,
) -> None:
    with sessions.begin() as session:
        record = reviews.sample_of_record(session, job_id)
        assert record is not None
        reviews.add_review(
            session,
            job_id=job_id,
            trial_id=trial_id,
            sample_id=record.id,
            verdict_seen=seen,
            verdict=verdict,
            note="",
            reviewer="ann",
            team="red",
            token_prefix=None,
            via="api",
        )


def _finished_job(scheduler: Scheduler, sessions: sessionmaker[Session]) -> tuple[Job, list[str]]:
    """A job of three trials that passed, failed and passed, judged by file_equals (right)
    and lenient (passes everything)."""
    job = submit(sessions, cases=["create-greeting", "fix-config", "count-lines"])
    claimed = [trial_id for trial_id, _ in scheduler.claim(3)]
    outcomes = ["passed", "failed", "passed"]
    for trial_id, outcome in zip(claimed, outcomes, strict=True):
        score = 1.0 if outcome == "passed" else 0.0
        judged = [JudgeScore("file_equals", score), JudgeScore("lenient", 1.0, "always")]
        scheduler.record(
            trial_id, TrialRecord(trial_id, TrialResult(outcome, score, judges=judged))
        )
    return job, claimed


def _draw(
    sessions: sessionmaker[Session], job_id: str, size: int, seed: int, *, blind: bool = True
) -> str:
    """A new sample of record, retiring the one before if any."""
    with sessions.begin() as session:
        drawn = draw(reviews.scored_candidates(session, job_id), size, seed)
        before = reviews.sample_of_record(session, job_id)
        made = reviews.add_sample(
            session,
            job_id,
            size,
            seed,
            [c.trial_id for c in drawn],
            "red",
            blind=blind,
            replaces=before,
        )
        return made.id


def test_reviews_reach_the_report_and_replace_the_cached_one(
    sessions: sessionmaker[Session], scheduler: Scheduler
) -> None:
    job, claimed = _finished_job(scheduler, sessions)
    plain = _report(sessions, job.id)
    assert plain.agreement is None and "agreement" not in report_json(plain)
    assert "Human review" not in render_text(plain)

    with sessions() as session:
        candidates = reviews.scored_candidates(session, job.id)
    sample_id = _draw(sessions, job.id, 3, 8)
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
    assert reviewed.agreement.sample_id == sample_id and reviewed.agreement.blind is True
    assert reviewed.agreement.retired_reviews == 0
    assert f"Counted: the reviews of sample {sample_id}, blind" in render_text(reviewed)
    assert _report(sessions, job.id) is reviewed


def test_a_job_has_one_sample_of_record_and_a_redraw_counts_only_its_own_reviews(
    sessions: sessionmaker[Session], scheduler: Scheduler
) -> None:
    job, claimed = _finished_job(scheduler, sessions)
    first = _draw(sessions, job.id, 3, 8)
    # A second sample of record beside the first is refused by the store itself (two
    # draws at once), and leaves the first as it was.
    with pytest.raises(IntegrityError), sessions.begin() as session:
        reviews.add_sample(session, job.id, 3, 9, claimed, "red")
    for trial_id in claimed:
        _review(sessions, job.id, trial_id, "fail")
    assert _report(sessions, job.id).agreement.reviewed == 3  # type: ignore[union-attr]

    second = _draw(sessions, job.id, 3, 9, blind=False)
    with sessions() as session:
        old = session.get_one(ReviewSample, first)
        assert old.retired_at is not None
        record = reviews.sample_of_record(session, job.id)
        assert record is not None and record.id == second and record.blind is False
    # Nobody reviewed the new sample yet: the report counts nothing and says what it left out.
    report = _report(sessions, job.id)
    assert report.agreement is not None
    assert (report.agreement.reviewed, report.agreement.rows) == (0, [])
    assert (report.agreement.retired_reviews, report.agreement.retired_samples) == (3, 1)
    assert (report.agreement.sample_id, report.agreement.blind) == (second, False)
    text = render_text(report)
    assert "Human review: 0 of 3 sampled trials reviewed" in text
    assert "not blind" in text and "3 review(s) made in 1 retired sample(s)" in text

    _review(sessions, job.id, claimed[0], "pass", seen=True)
    agreement = _report(sessions, job.id).agreement
    assert agreement is not None and agreement.reviewed == 1
    (verdict_row,) = [row for row in agreement.rows if row.judge is None]
    assert verdict_row.confusion.human_pass_judge_pass == 1  # the new review, not the old fail
    assert agreement.verdict_seen == 1 and agreement.retired_reviews == 3


def test_in_a_blind_sample_a_revision_made_after_seeing_the_verdict_does_not_count(
    sessions: sessionmaker[Session], scheduler: Scheduler
) -> None:
    job, claimed = _finished_job(scheduler, sessions)
    _draw(sessions, job.id, 3, 8)
    _review(sessions, job.id, claimed[1], "pass")  # blind: the trial failed
    _review(sessions, job.id, claimed[1], "fail", seen=True)  # revised after seeing it
    agreement = _report(sessions, job.id).agreement
    assert agreement is not None and agreement.verdict_seen == 0
    (verdict_row,) = [row for row in agreement.rows if row.judge is None]
    assert verdict_row.confusion.human_pass_judge_fail == 1
