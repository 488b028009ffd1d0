"""The store on both databases it supports: SQLite in a file, and a real PostgreSQL.

PostgreSQL comes from EXAMHALL_TEST_POSTGRES_URL (`.ci/run` installs, starts and exports it):
each test gets a database of its own, created from that URL's and dropped after. Without the
variable the PostgreSQL cases skip, except in CI, where they fail: a CI that quietly skips
them would prove nothing about PostgreSQL.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql
from sqlalchemy import URL, Engine, make_url
from sqlalchemy.orm import Session, sessionmaker

from service.backends.fake import FakeBackend, FakeWorker
from service.domain.job_spec import JobRequest
from service.domain.planner import resolve_design
from service.scheduler import Scheduler
from service.store.db import make_engine, migrate, session_factory
from service.store.jobs import create_job
from service.store.models import Job
from service.suites.python import load_suite

POSTGRES_ENV = "EXAMHALL_TEST_POSTGRES_URL"
SMOKE = ["create-greeting", "fix-config", "count-lines", "notes-in-steps"]


def postgres_base_url() -> URL:
    """The URL tests create their databases from, or a skip (a failure in CI) without one."""
    value = os.environ.get(POSTGRES_ENV)
    if not value:
        reason = f"{POSTGRES_ENV} is not set (e.g. postgresql+psycopg://u:p@127.0.0.1/db)"
        if os.environ.get("CI", "").lower() not in ("", "0", "false"):
            pytest.fail(f"CI must test PostgreSQL: {reason}")
        pytest.skip(reason)
    return make_url(value)


def _connect(url: URL) -> psycopg.Connection[Any]:
    return psycopg.connect(
        host=url.host,
        port=url.port,
        user=url.username,
        password=url.password,
        dbname=url.database,
        autocommit=True,  # CREATE and DROP DATABASE refuse to run inside a transaction
        connect_timeout=10,
    )


@pytest.fixture(scope="session")
def postgres_server() -> URL:
    base = postgres_base_url()
    try:
        _connect(base).close()
    except psycopg.OperationalError as exc:
        # Set but unreachable is a broken setup, not a reason to skip.
        pytest.fail(f"PostgreSQL at {base.render_as_string()} is not reachable: {exc}")
    return base


def fresh_postgres_database(base: URL) -> Iterator[str]:
    name = f"examhall_t_{uuid.uuid4().hex[:16]}"
    with _connect(base) as connection:
        connection.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield base.set(database=name).render_as_string(hide_password=False)
    finally:
        drop = sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        for attempt in range(20):
            try:
                with _connect(base) as connection:
                    # FORCE: a test's failure may leave a subprocess or a pooled connection
                    # behind.
                    connection.execute(drop)
                break
            except psycopg.errors.InsufficientPrivilege:
                # An autovacuum worker (the server's own, which FORCE may not end) is
                # analysing the test's tables: it ends on its own in a moment.
                if attempt == 19:
                    raise
                time.sleep(0.5)


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """An empty database: a SQLite file, or a new PostgreSQL database dropped afterwards."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'store.db'}"
        return
    yield from fresh_postgres_database(request.getfixturevalue("postgres_server"))


@pytest.fixture
def engine(database_url: str) -> Iterator[Engine]:
    """The database migrated to head, as `examhall serve` leaves it."""
    engine = make_engine(database_url)
    migrate(engine)
    yield engine
    engine.dispose()


@pytest.fixture
def sessions(engine: Engine) -> sessionmaker[Session]:
    return session_factory(engine)


def _no_sandbox(worker: FakeWorker) -> int:
    raise AssertionError(f"a store test started a sandbox for {worker.launch.trial_id}")


def make_scheduler(sessions: sessionmaker[Session], owner: str = "tests:1:store") -> Scheduler:
    """A scheduler for the store's work alone: these tests start no sandbox, and a backend
    asked for one fails the test."""
    return Scheduler(sessions, FakeBackend(_no_sandbox, owner=owner), max_containers=4)


@pytest.fixture
def scheduler(sessions: sessionmaker[Session]) -> Iterator[Scheduler]:
    made = make_scheduler(sessions)
    yield made
    made.stop()


def submit(sessions: sessionmaker[Session], **body: Any) -> Job:
    """A job through the real planning and create_job, as POST /v1/jobs stores it (the case
    list is given, since discovering it needs a sandbox)."""
    body = {"suite": "smoke", "model": {"provider": "simulated", "id": "coin?p=1"}, **body}
    request = JobRequest.model_validate(body)
    cases = body.get("cases") or SMOKE
    design = resolve_design(request, cases)
    with sessions.begin() as session:
        return create_job(
            session,
            request,
            load_suite("smoke"),
            design,
            image="examhall/sandbox:test",
            image_digest="sha256:test",
        )
