"""A job's report is built once per change of its trials (its change marker), and kept
between them."""

from __future__ import annotations

from sqlalchemy.orm import Session, sessionmaker

from sandbox.protocol import TrialResult
from service.launch.trial import TrialRecord
from service.report.from_store import job_report
from service.report.model import Report
from service.scheduler import Scheduler
from service.store.jobs import mark_cancelled
from service.store.models import Job
from tests.store.conftest import submit


def _report(sessions: sessionmaker[Session], job_id: str) -> Report:
    with sessions() as session:
        return job_report(session, session.get_one(Job, job_id))


def test_a_finished_jobs_report_is_built_once(
    sessions: sessionmaker[Session], scheduler: Scheduler
) -> None:
    job = submit(sessions, cases=["create-greeting", "fix-config"])
    first, second = (trial_id for trial_id, _ in scheduler.claim(2))
    scheduler.record(first, TrialRecord(first, TrialResult("passed", score=1.0)))
    running = _report(sessions, job.id)
    # Still running: every call reads the rows again and sees the new result.
    scheduler.record(second, TrialRecord(second, TrialResult("failed", score=0.0)))
    finished = _report(sessions, job.id)
    assert running is not finished
    [variant] = finished.variants
    assert (variant.outcomes.passed, variant.outcomes.failed) == (1, 1)
    assert _report(sessions, job.id) is finished


def test_a_cancelled_jobs_report_waits_for_its_running_trials(
    sessions: sessionmaker[Session], scheduler: Scheduler
) -> None:
    job = submit(sessions, cases=["create-greeting", "fix-config"])
    [(running, _)] = scheduler.claim(1)
    with sessions.begin() as session:  # as DELETE /v1/jobs/{id} leaves it
        mark_cancelled(session, session.get_one(Job, job.id))
    unsettled = _report(sessions, job.id)
    # Kept while nothing changes (the job's change marker stands)...
    assert _report(sessions, job.id) is unsettled
    # ...and built again when the trial's run returns and is dropped (the marker moved).
    scheduler.record(running, TrialRecord(running, TrialResult("passed", score=1.0)))
    settled = _report(sessions, job.id)
    assert settled is not unsettled
    assert _report(sessions, job.id) is settled


def test_a_running_comparisons_report_reads_its_queued_trials_too(
    sessions: sessionmaker[Session], scheduler: Scheduler
) -> None:
    """A comparison reads finished trials from their index, and the others from their rows
    unless the job's kept counts say none is queued or running; while one is, its trials
    count as not run, and once all have run the report has them all."""
    job = submit(
        sessions,
        cases=["create-greeting"],
        comparison="docs-lift",
        docs={"files": {"README.md": "# Notes\n"}},
    )
    [(first, _)] = scheduler.claim(1)
    scheduler.record(first, TrialRecord(first, TrialResult("passed", score=1.0)))
    running = _report(sessions, job.id)
    assert sum(v.outcomes.passed for v in running.variants) == 1
    assert sum(v.outcomes.unfinished for v in running.variants) == 1
    [(second, _)] = scheduler.claim(1)
    scheduler.record(second, TrialRecord(second, TrialResult("failed", score=0.0)))
    finished = _report(sessions, job.id)
    assert sum(v.outcomes.unfinished for v in finished.variants) == 0
    assert sorted((v.outcomes.passed, v.outcomes.failed) for v in finished.variants) == [
        (0, 1),
        (1, 0),
    ]
