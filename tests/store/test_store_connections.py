"""A plane keeps its store connections open: one per trial thread and a few for its loops
(service/app.py, service/store/db.py), so that a busy plane does not open and close a
connection (on PostgreSQL, fork a server process) for every transaction beyond SQLAlchemy's
default five. Run on both stores, through the real app, scheduler and HTTP."""

from __future__ import annotations

import threading
import time
from typing import Any

from sqlalchemy import Engine, event
from sqlalchemy.orm import Session, sessionmaker

from sandbox.protocol import EventMessage, LifecycleEvent, ResultMessage, TrialResult
from service.app import PLANE_CONNECTIONS
from service.backends.fake import FakeBackend, FakeWorker
from tests.docker.conftest import serve
from tests.store.conftest import submit

SLOTS = 8
ROUNDS = 25  # x the smoke suite's four cases


def _scored(worker: FakeWorker) -> int:
    worker.say(EventMessage(1, LifecycleEvent("agent", "a step")))
    worker.say(ResultMessage(TrialResult("passed", score=1.0)))
    return 0


def test_a_busy_plane_opens_no_connection_beyond_its_threads(
    database_url: str, engine: Engine, sessions: sessionmaker[Session]
) -> None:
    job = submit(sessions, rounds=ROUNDS)
    engine.dispose()  # the test's own connections are not the plane's
    opened: list[Any] = []
    lock = threading.Lock()

    def counted(dbapi_connection: Any, _record: Any) -> None:
        with lock:
            opened.append(dbapi_connection)

    event.listen(Engine, "connect", counted)
    try:
        backend = lambda: FakeBackend(_scored)  # noqa: E731
        server = serve(database_url, max_containers=SLOTS, make_backend=backend)
        try:
            deadline = time.monotonic() + 300
            while (view := server.http.get(f"/v1/jobs/{job.id}").json())["status"] != "finished":
                assert time.monotonic() < deadline, view
                time.sleep(0.1)
        finally:
            server.stop()
    finally:
        event.remove(Engine, "connect", counted)
    assert view["counts"]["finished"] == ROUNDS * 4, view
    # With SQLAlchemy's default pool of five, a plane of eight slots opened 31 connections on
    # PostgreSQL for these 100 trials, and more the longer it ran.
    assert len(opened) <= SLOTS + PLANE_CONNECTIONS, len(opened)
