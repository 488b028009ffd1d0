"""A trial's writes outlive its store's server restarting (service/scheduler/outages.py):
events refused while it is away stay buffered and are written once it is back, in order and
once each (the last of them with the trial's result), and the fault is named while it lasts.
On a PostgreSQL server of the test's own (tests/own_postgres.py), stopped and started under
the writer."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import replace

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from sandbox.protocol import LifecycleEvent, TrialResult
from service.faults import Faults
from service.scheduler import EventSink
from service.scheduler.ingest import EVENT_FLUSH_S
from service.scheduler.outages import Outages
from service.scheduler.result_writer import ResultWriter
from service.store import queue
from service.store.db import make_engine, migrate, session_factory
from service.store.models import Event as EventRow
from service.store.models import Trial
from service.store.results import Ended
from tests import own_postgres
from tests.own_postgres import OwnPostgres
from tests.store.conftest import submit


@pytest.fixture
def server() -> Iterator[OwnPostgres]:
    started = own_postgres.own_postgres()
    yield started
    own_postgres.remove(started)


@pytest.fixture
def sessions(server: OwnPostgres) -> Iterator[sessionmaker[Session]]:
    engine = make_engine(server.url)
    migrate(engine)
    yield session_factory(engine)
    engine.dispose()


def _stored(sessions: sessionmaker[Session], trial_id: str) -> list[tuple[int, str | None]]:
    with sessions() as session:
        rows = session.scalars(select(EventRow).where(EventRow.trial_id == trial_id))
        return sorted((row.seq, row.payload.get("detail")) for row in rows)


def test_events_refused_while_the_server_is_away_are_written_once_it_is_back(
    server: OwnPostgres, sessions: sessionmaker[Session]
) -> None:
    submit(sessions, cases=["create-greeting"])
    owner = "tests:1:outage"
    trial_id = queue.claim(sessions, owner, 1, [])[0].trial_id
    faults = Faults()
    outages = Outages(faults, threading.Event())
    sink = EventSink(sessions, trial_id, outages)
    details = [f"step {n}" for n in range(1, 9)]
    for detail in details[:3]:
        sink(LifecycleEvent(step="agent", detail=detail))
    sink.flush()

    server.stop()
    for detail in details[3:]:
        time.sleep(EVENT_FLUSH_S)  # each event is due a batch: each is refused, none raises
        sink(LifecycleEvent(step="agent", detail=detail))
    assert list(faults.current()) == ["store_unreachable"]
    assert "cannot be reached" in faults.current()["store_unreachable"]
    assert len(sink.pending) == 5

    # The trial's last batch goes with its result, which waits for the server.
    writer = ResultWriter(sessions, owner, outages)
    restart = threading.Timer(1.0, server.start)
    restart.start()
    ended = Ended(trial_id, TrialResult("passed", score=1.0), {}, None, 1.0, None)
    job_id = writer.write(replace(ended, events=sink.rest()))
    restart.join()
    writer.close()
    assert job_id is not None
    assert faults.current() == {}
    assert _stored(sessions, trial_id) == list(enumerate(details, start=1))
    with sessions() as session:
        trial = session.get(Trial, trial_id)
        assert trial is not None and trial.outcome == "passed"
