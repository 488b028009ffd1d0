"""A SQLite store's checkpoints run on a thread of their own (service/store/checkpoints.py):
the event sink's batches reach the database file soon after they commit, without the sink's
commits doing the copying, and the sink's connection goes back to the pool as it came."""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, func, select
from sqlalchemy.orm import Session, sessionmaker

from sandbox.protocol import ToolResultEvent, TrialResult
from service.launch.trial import TrialRecord
from service.scheduler import EventSink
from service.store import checkpoints
from service.store.db import make_engine, migrate, session_factory
from service.store.models import Event as EventRow
from service.store.models import Trial
from tests.store.conftest import make_scheduler, submit

PAGE = 4096


@pytest.fixture
def store(tmp_path: Path) -> Iterator[tuple[Path, Engine]]:
    path = tmp_path / "store.db"
    engine = make_engine(f"sqlite:///{path}")
    migrate(engine)
    yield path, engine
    engine.dispose()


def _trial(sessions: sessionmaker[Session]) -> str:
    job = submit(sessions, cases=["create-greeting"])
    with sessions() as session:
        return session.scalars(select(Trial.id).where(Trial.job_id == job.id)).one()


def _write(sessions: sessionmaker[Session], trial_id: str, pages: int, start: int = 0) -> int:
    """About `pages` pages of events in batches of 100 (each a tool result of a page's size);
    the number of events written."""
    sink = EventSink(sessions, trial_id)
    sink.seq = start
    events = pages
    for n in range(events):
        sink(ToolResultEvent(tool_call_id=f"c{n}", name="read", content="x" * (PAGE - 200)))
        if sink.seq % 100 == 0:
            sink.flush()
    sink.flush()
    return events


def _until(condition: Callable[[], bool], what: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout} s: {what}")
        time.sleep(0.01)


def _stored(sessions: sessionmaker[Session], trial_id: str) -> int:
    with sessions() as session:
        count = session.scalar(select(func.count()).where(EventRow.trial_id == trial_id))
    return int(count or 0)


def test_a_few_batches_reach_the_database_file_without_another_write(
    store: tuple[Path, Engine],
) -> None:
    path, engine = store
    sessions = session_factory(engine)
    trial_id = _trial(sessions)
    before = os.path.getsize(path)
    # 300 pages: SQLite's own checkpoint would wait for 1,000, leaving them in the log (and
    # unsynced) until later writes came.
    written = _write(sessions, trial_id, pages=300)
    checkpointer = checkpoints.checkpointer(str(path))
    _until(
        lambda: (
            checkpointer.checkpoints >= 1
            and os.path.getsize(path) >= before + written * (PAGE - 200)
        ),
        "the events' pages copied into the database file",
    )
    assert _stored(sessions, trial_id) == written


def test_the_sinks_connection_goes_back_checkpointing_as_sqlite_does(
    store: tuple[Path, Engine],
) -> None:
    _, engine = store
    sessions = session_factory(engine)
    trial_id = _trial(sessions)
    engine.dispose()  # from here on, the sink's connection is the pool's only one
    _write(sessions, trial_id, pages=5)
    intruder = EventSink(sessions, trial_id)  # seq 1 again: its batch fails
    intruder(ToolResultEvent(tool_call_id="c", name="read", content="again"))
    with pytest.raises(Exception, match=r"(?i)unique"):
        intruder.flush()
    assert engine.pool.checkedin() == 1
    with engine.connect() as connection:
        pages = connection.exec_driver_sql("PRAGMA wal_autocheckpoint").scalar()
    assert pages == checkpoints.SQLITE_DEFAULT_PAGES
    assert _stored(sessions, trial_id) == 5


def test_a_log_past_the_restart_size_starts_again_from_its_beginning(
    store: tuple[Path, Engine], monkeypatch: pytest.MonkeyPatch
) -> None:
    path, engine = store
    monkeypatch.setattr(checkpoints, "RESTART_PAGES", 200)
    monkeypatch.setattr(checkpoints, "INTERVAL_S", 0.0)
    sessions = session_factory(engine)
    trial_id = _trial(sessions)
    # A reader holds the log at its start meanwhile, so no writer can find it all copied and
    # start it again itself: only the thread's restart (once the reader is gone) can.
    reader = sqlite3.connect(path)
    reader.execute("BEGIN")
    reader.execute("SELECT count(*) FROM events").fetchone()
    written = _write(sessions, trial_id, pages=400)
    log_pages = _log_pages(path)
    assert log_pages >= 400
    reader.rollback()
    reader.close()
    written += _write(sessions, trial_id, pages=50, start=written)
    checkpointer = checkpoints.checkpointer(str(path))
    _until(lambda: checkpointer.restarts >= 1, "a restart")
    written += _write(sessions, trial_id, pages=50, start=written)
    # The log was written again from its start: no frame beyond what came since.
    _until(lambda: _log_pages(path) < log_pages, "the log begun again")
    assert _stored(sessions, trial_id) == written


def test_the_thread_ends_when_idle_and_the_next_batch_starts_another(
    store: tuple[Path, Engine], monkeypatch: pytest.MonkeyPatch
) -> None:
    path, engine = store
    monkeypatch.setattr(checkpoints, "IDLE_S", 0.2)
    sessions = session_factory(engine)
    trial_id = _trial(sessions)
    checkpointer = checkpoints.checkpointer(str(path))
    written = _write(sessions, trial_id, pages=20)
    assert checkpointer.running  # for IDLE_S (0.2 s) after the last nudge
    _until(lambda: not checkpointer.running, "the idle thread ended")
    done = checkpointer.checkpoints
    size = os.path.getsize(path)
    written += _write(sessions, trial_id, pages=100, start=written)
    _until(
        lambda: checkpointer.checkpoints > done and os.path.getsize(path) > size,
        "the later batch copied by a new thread",
    )
    assert _stored(sessions, trial_id) == written


def test_a_trials_result_is_checkpointed_without_an_event_after_it(
    store: tuple[Path, Engine],
) -> None:
    path, engine = store
    sessions = session_factory(engine)
    submit(sessions, cases=["create-greeting"])
    scheduler = make_scheduler(sessions)
    try:
        [(trial_id, _)] = scheduler.claim(1)
        checkpointer = checkpoints.checkpointer(str(path))
        assert checkpointer.checkpoints == 0
        result = TrialResult("passed", score=1.0)
        scheduler.record(trial_id, TrialRecord(trial_id, result, artifacts={}))
        _until(lambda: checkpointer.checkpoints >= 1, "the result's commit checkpointed")
    finally:
        scheduler.stop()


def _log_pages(path: Path) -> int:
    """Frames in the write-ahead log, from its file's size (a 32-byte header, then frames of a
    24-byte header and a page)."""
    return max(0, (os.path.getsize(f"{path}-wal") - 32) // (24 + PAGE))


def test_a_store_is_named_by_its_absolute_path_and_memory_or_uris_have_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    relative = make_engine("sqlite:///store.db")
    assert checkpoints.database_file(relative) == str(tmp_path / "store.db")
    for url in ("sqlite://", "sqlite:///:memory:", "sqlite:///file:store.db?uri=true"):
        assert checkpoints.database_file(make_engine(url)) is None, url


def test_a_checkpointer_of_a_file_that_is_gone_creates_none_and_ends(tmp_path: Path) -> None:
    gone = tmp_path / "gone.db"
    checkpointer = checkpoints.Checkpointer(str(gone))
    checkpointer.nudge()
    _until(lambda: not checkpointer.running, "the thread ended")
    assert not gone.exists()
    assert checkpointer.checkpoints == 0
