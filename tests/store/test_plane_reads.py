"""What a plane reads of the store while its trials run, on SQLite and PostgreSQL: a job's
row once for all its trials (service/scheduler/job_cache.py), a peer's cancels at most every
`CANCEL_POLL_S` however often the loop turns, and both still right: the trials run as their
job says, and a cancel another plane writes stops them. A claim reads the trials it takes,
not the whole queue (service/store/queue.py)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from sqlalchemy import Engine, event, select, text
from sqlalchemy.orm import Session, sessionmaker

from sandbox.protocol import LifecycleEvent, ResultMessage, TrialResult
from service.backends.fake import FakeBackend, FakeWorker
from service.scheduler import Scheduler
from service.scheduler.loop import CANCEL_POLL_S
from service.store import queue
from service.store.db import make_engine, migrate, reading, session_factory
from service.store.jobs import mark_cancelled
from service.store.models import Job, Trial
from tests.store.conftest import submit


def _statements(engine: Engine) -> list[str]:
    """Every statement the engine sends from now on, as text."""
    sent: list[str] = []

    def seen(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        sent.append(statement)

    event.listen(engine, "before_cursor_execute", seen)
    return sent


def _spec(w: FakeWorker) -> dict[str, Any]:
    """The run request's spec, as the worker reads it."""
    spec: dict[str, Any] = json.loads(w.request)["spec"]
    return spec


def _wait_for(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


@pytest.fixture
def hanging() -> Iterator[tuple[Callable[[FakeWorker], int], list[FakeWorker]]]:
    """A worker that tells it started and then runs until its sandbox is killed."""
    started: list[FakeWorker] = []
    lock = threading.Lock()

    def worker(w: FakeWorker) -> int:
        with lock:
            started.append(w)
        w.hang()
        return 0

    yield worker, started


def test_a_planes_trials_read_their_job_once_and_a_peers_cancel_still_stops_them(
    engine: Engine,
    sessions: sessionmaker[Session],
    hanging: tuple[Callable[[FakeWorker], int], list[FakeWorker]],
) -> None:
    worker, started = hanging
    job = submit(sessions, rounds=2, seed=7)  # 8 trials
    sent = _statements(engine)
    # A loop that turns every 10 ms: it would ask about cancels 100 times a second.
    plane = Scheduler(
        sessions, FakeBackend(worker, owner="tests:1:reads"), max_containers=8, poll_s=0.01
    )
    plane.start()
    try:
        _wait_for(lambda: len(started) == 8)
        # Each trial runs as its claimed row and its job say, from one read of the job.
        with sessions() as session:
            rows = {t.id: t for t in session.scalars(select(Trial))}
        for w in started:
            spec, row = _spec(w), rows[w.launch.trial_id]
            assert (spec["case_id"], spec["variant"], spec["round"], spec["seed"]) == (
                row.case_id,
                row.variant,
                row.round,
                7,
            )
        job_reads = [s for s in sent if "jobs.spec" in s]
        assert len(job_reads) == 1, job_reads

        before = len(sent)
        time.sleep(1.0)
        polls = [s for s in sent[before:] if "jobs.status" in s and "trials.id IN" in s]
        assert 1 <= len(polls) <= 1.0 / CANCEL_POLL_S + 2, len(polls)

        # Another control plane's API cancels the job: this plane sees it and stops its
        # trials, whose rows are dropped (a cancelled job keeps only trials that finished).
        with sessions.begin() as session:
            mark_cancelled(session, session.get_one(Job, job.id))
        _wait_for(plane.idle, timeout=5.0)
        with sessions() as session:
            assert session.scalars(select(Trial)).all() == []
    finally:
        plane.stop()


def test_a_plane_reads_a_jobs_row_again_for_a_job_it_has_not_seen(
    engine: Engine, sessions: sessionmaker[Session]
) -> None:
    """Two jobs of different seeds: each trial gets its own job's, from a read per job."""
    seeds: dict[str, int] = {}

    def worker(w: FakeWorker) -> int:
        seeds[w.launch.trial_id] = _spec(w)["seed"]
        w.say(LifecycleEvent("started"))
        w.say(ResultMessage(TrialResult("passed", score=1.0)))
        return 0

    first, second = submit(sessions, seed=1), submit(sessions, seed=2)
    sent = _statements(engine)
    plane = Scheduler(sessions, FakeBackend(worker, owner="tests:1:reads"), max_containers=4)
    plane.start()
    try:
        _wait_for(lambda: len(seeds) == 8 and plane.idle())
    finally:
        plane.stop()
    with sessions() as session:
        job_of = {t: j for t, j in session.execute(select(Trial.id, Trial.job_id))}
    assert {t: seeds[t] for t in job_of} == {
        t: {first.id: 1, second.id: 2}[j] for t, j in job_of.items()
    }
    # One read of each job's spec for its trials, beside the results' own reads of the job
    # (locked, with its counts, as they are written).
    cached = [s for s in sent if "jobs.spec" in s and "FOR UPDATE" not in s]
    ends = len([s for s in sent if "job_counts.version" in s and s.startswith("UPDATE")])
    if engine.dialect.name == "postgresql":
        assert len(cached) == 2, cached
    else:  # SQLite writes no FOR UPDATE: the ends' reads of the job look alike
        assert len(cached) <= 2 + ends, (cached, ends)


def test_reads_that_end_in_a_commit_keep_the_drivers_prepared_statements(
    database_url: str,
) -> None:
    """psycopg prepares a statement it has sent five times on a connection, and forgets all
    it prepared at a rollback: `reading` ends its reads with a commit, so a plane's
    repeated reads are parsed and planned once per connection rather than every time."""
    if not database_url.startswith("postgresql"):
        pytest.skip("prepared statements are PostgreSQL's")
    engine = make_engine(database_url, connections=1)
    try:
        sessions = session_factory(engine)
        probe = text("SELECT count(*) FROM pg_class WHERE relname = :name")

        def prepared() -> int:
            with engine.connect() as connection:
                found = connection.execute(
                    text("SELECT count(*) FROM pg_prepared_statements WHERE statement LIKE :s"),
                    {"s": "SELECT count(*) FROM pg_class%"},
                ).scalar_one()
                connection.commit()
                return int(found)

        for _ in range(8):
            with sessions() as session:  # ends in a rollback
                session.execute(probe, {"name": "jobs"})
        assert prepared() == 0
        for _ in range(8):
            with reading(sessions) as session:
                session.execute(probe, {"name": "jobs"})
        assert prepared() == 1
    finally:
        engine.dispose()


def test_a_claim_reads_the_trials_it_takes_not_the_whole_queue(database_url: str) -> None:
    """A claim's cost does not grow with the queue: from a job of 4,000 queued trials, a
    claim of four reads a handful of the trials' rows (the queue's index, in plan order),
    where a read of the team's whole queue, sorted, would read all 4,000. Counted by the
    server's own statistics of rows read, so PostgreSQL's alone."""
    if not database_url.startswith("postgresql"):
        pytest.skip("the server's statistics of rows read are PostgreSQL's")
    engine = make_engine(database_url, connections=1)  # one backend: its statistics are ours
    migrate(engine)
    sessions = session_factory(engine)
    try:
        job = submit(sessions, rounds=1000)  # 4 cases: 4,000 trials

        def trial_rows_read() -> int:
            with engine.connect() as connection:
                connection.execute(text("SELECT pg_stat_force_next_flush()"))
                connection.commit()  # idle: this backend's counts go to the server's
                connection.execute(text("SELECT pg_stat_clear_snapshot()"))
                read = connection.execute(
                    text(
                        "SELECT coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0)"
                        " FROM pg_stat_user_tables WHERE relname = 'trials'"
                    )
                ).scalar_one()
                connection.commit()
                return int(read)

        before = trial_rows_read()
        claimed = queue.claim(sessions, "tests:1:reads", 4, [])
        read = trial_rows_read() - before
        with sessions() as session:
            first = session.scalars(
                select(Trial).where(Trial.job_id == job.id).order_by(Trial.order).limit(4)
            ).all()
        assert [c.trial_id for c in claimed] == [t.id for t in first]  # still in plan order
        assert read < 100, read
    finally:
        engine.dispose()
