"""The counts the store keeps per job (`service.store.counts`): equal, after every kind of
change, to counting the job's trials; kept by two control planes at once; and the change
marker the event stream reads."""

from __future__ import annotations

import threading
from typing import Any

from sqlalchemy import event, select
from sqlalchemy.orm import Session, sessionmaker

from sandbox.protocol import TrialResult
from service.api.stream import JobWatch
from service.launch.trial import TrialRecord
from service.scheduler import Scheduler
from service.store import counts
from service.store.jobs import mark_cancelled
from service.store.models import Job, JobCounts, Trial
from service.store.queue import requeue_own
from tests.store.conftest import make_scheduler, submit

PASSED = TrialResult("passed", score=1.0)
FAILED = TrialResult("failed", score=0.0)
INFRA = TrialResult("error", error_kind="infra_error", error_message="no container")


def kept(sessions: sessionmaker[Session], job_id: str) -> dict[str, int]:
    with sessions() as session:
        found = counts.read(session, job_id)
        assert found is not None, "the job has no counts row"
        return found.as_dict()


def counted(sessions: sessionmaker[Session], job_id: str) -> dict[str, int]:
    with sessions() as session:
        return counts.count_trials(session, job_id)


def assert_kept(sessions: sessionmaker[Session], job_id: str, **expected: int) -> None:
    now = kept(sessions, job_id)
    assert now == counted(sessions, job_id)
    assert {name: now[name] for name in expected} == expected


def test_counts_follow_every_change_of_a_job(
    sessions: sessionmaker[Session], scheduler: Scheduler
) -> None:
    job = submit(sessions, cases=["create-greeting", "fix-config", "count-lines"], rounds=2)
    assert_kept(sessions, job.id, attempts=6, queued=6, running=0, finished=0)
    claimed = [trial_id for trial_id, _ in scheduler.claim(4)]
    assert_kept(sessions, job.id, queued=2, running=4)
    scheduler.record(claimed[0], TrialRecord(claimed[0], PASSED))
    scheduler.record(claimed[1], TrialRecord(claimed[1], FAILED))
    assert_kept(sessions, job.id, running=2, finished=2, passed=1, failed=1)
    # An infra error is retried: a new queued attempt, the planned trial not finished.
    scheduler.record(claimed[2], TrialRecord(claimed[2], INFRA))
    assert_kept(sessions, job.id, attempts=7, queued=3, running=1, finished=2, error=0)
    # A run the plane gives up on: its trial is queued again.
    assert requeue_own(sessions, claimed[3], scheduler.owner) == [claimed[3]]
    assert_kept(sessions, job.id, queued=4, running=0)
    # Four infra errors: three first attempts are retried, the retried one (past the retry
    # limit) is its planned trial's final error.
    retry = [t for t, _ in scheduler.claim(10)]
    assert len(retry) == 4
    assert_kept(sessions, job.id, queued=0, running=4)
    for trial_id in retry:
        scheduler.record(trial_id, TrialRecord(trial_id, INFRA))
    assert_kept(sessions, job.id, finished=3, error=1, queued=3, attempts=10)
    # Cancel: the queued retries go; their planned trials count as their earlier attempt.
    with sessions.begin() as session:
        row = session.get(Job, job.id)
        assert row is not None
        mark_cancelled(session, row)
    assert_kept(sessions, job.id, queued=0, running=0, attempts=7, finished=6, error=4)


def test_a_running_trial_of_a_cancelled_job_is_counted_out(
    sessions: sessionmaker[Session], scheduler: Scheduler
) -> None:
    job = submit(sessions, cases=["create-greeting", "fix-config"], max_infra_retries=1)
    first, second = (t for t, _ in scheduler.claim(2))
    scheduler.record(first, TrialRecord(first, INFRA))
    [(retry, _)] = scheduler.claim(1)
    with sessions.begin() as session:
        row = session.get(Job, job.id)
        assert row is not None
        mark_cancelled(session, row)
    # Both running trials' results arrive after the cancel: they are dropped, and the
    # retried one's planned trial is its first attempt's infra error again.
    scheduler.record(retry, TrialRecord(retry, PASSED))
    scheduler.record(second, TrialRecord(second, PASSED))
    assert_kept(sessions, job.id, attempts=1, running=0, finished=1, error=1, passed=0)


def test_a_job_stored_without_its_counts_row_is_counted_on_its_first_change(
    sessions: sessionmaker[Session], scheduler: Scheduler
) -> None:
    job = submit(sessions, cases=["create-greeting", "fix-config"])
    with sessions.begin() as session:
        session.execute(JobCounts.__table__.delete().where(JobCounts.job_id == job.id))
    [(trial_id, _)] = scheduler.claim(1)
    assert_kept(sessions, job.id, queued=1, running=1, attempts=2)
    scheduler.record(trial_id, TrialRecord(trial_id, PASSED))
    assert_kept(sessions, job.id, finished=1, passed=1)


def _plane(sessions: sessionmaker[Session], name: str, results: list[str]) -> None:
    plane = make_scheduler(sessions, owner=f"tests:{name}:counts")
    try:
        while claimed := plane.claim(3):
            for trial_id, _ in claimed:
                result = INFRA if hash(trial_id) % 5 == 0 else PASSED
                plane.record(trial_id, TrialRecord(trial_id, result))
                results.append(trial_id)
    finally:
        plane.stop()


def test_two_control_planes_at_once_keep_the_counts(sessions: sessionmaker[Session]) -> None:
    """Two planes (threads, each its own connections) claim and finish one job's trials at
    once, with retries: the kept counts equal the trials counted afresh, and the job's
    version rose with every change."""
    job = submit(sessions, rounds=10, max_infra_retries=2)  # 40 trials
    done: list[str] = []
    planes = [threading.Thread(target=_plane, args=(sessions, name, done)) for name in ("a", "b")]
    for plane in planes:
        plane.start()
    for plane in planes:
        plane.join(timeout=240)
    assert not any(plane.is_alive() for plane in planes)
    assert_kept(sessions, job.id, queued=0, running=0, finished=40)
    with sessions() as session:
        row = session.get(Job, job.id)
        assert row is not None and row.status == "finished"
        version = counts.version(session, job.id)
        changes = session.scalars(select(Trial.changed).where(Trial.job_id == job.id)).all()
    # Each trial was last changed by its own result's transaction: one version each (two
    # transactions that took the same version would let a stream miss one of them), none
    # past the job's.
    assert version is not None and len(set(changes)) == len(changes) == len(done)
    assert max(changes) <= version


def test_the_stream_reads_only_what_changed(
    sessions: sessionmaker[Session], scheduler: Scheduler
) -> None:
    job = submit(sessions, rounds=5)  # 20 trials
    watch = JobWatch(sessions, job.id)
    first, _ = watch.poll()
    assert "event: counts" in [e.split("\n")[0] for e in first]
    reads: list[str] = []

    def statements(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        reads.append(statement)

    engine = sessions.kw["bind"]
    event.listen(engine, "before_cursor_execute", statements)
    try:
        assert watch.poll() == ([], False)
        # Nothing changed: the marker and the job's row, never the trials.
        assert not [s for s in reads if "FROM trials" in s]
        [(trial_id, _)] = scheduler.claim(1)
        events, over = watch.poll()
        assert not over
        trial_events = [e for e in events if e.startswith("event: trial")]
        assert len(trial_events) == 1 and trial_id in trial_events[0]
        reads.clear()
        scheduler.record(trial_id, TrialRecord(trial_id, PASSED))
        events, _ = watch.poll()
        assert [e.split("\n")[0] for e in events][:2] == ["event: trial", "event: counts"]
        # The trials read are those changed since the last version seen.
        assert any("trials.changed >" in s for s in reads)
    finally:
        event.remove(engine, "before_cursor_execute", statements)
