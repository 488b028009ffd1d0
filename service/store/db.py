"""Opening the database: engine, sessions, and migrations run at start."""

from __future__ import annotations

import json
import math
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from sqlalchemy import Connection, Engine, create_engine, event, make_url, text
from sqlalchemy.orm import Session, sessionmaker

from service.settings import get_settings

MIGRATIONS = Path(__file__).resolve().parent / "migrations"


def database_url() -> str:
    return get_settings().database_url


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    # WAL lets the API read while the scheduler writes; the busy timeout rides out the
    # short write locks instead of failing with "database is locked".
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA busy_timeout=10000")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(item) for item in value]
    return value


def json_dumps(value: Any) -> str:
    """JSON columns hold standard JSON on both databases: PostgreSQL's json type (and the
    API's responses) refuse NaN and Infinity, which a model's tool-call arguments can carry,
    so they are stored as null rather than fail the write."""
    try:
        return json.dumps(value, allow_nan=False)
    except ValueError:
        return json.dumps(_finite(value), allow_nan=False)


def _postgres_text(dbapi_connection: Any, _record: Any) -> None:
    from psycopg.types.string import StrDumperUnknown

    class NulFreeText(StrDumperUnknown):
        # PostgreSQL's text cannot hold NUL, which SQLite's can and an agent's output may
        # contain; refusing it would turn a trial's result into an infra error.
        def dump(self, obj: str) -> bytes:
            return obj.replace("\x00", "\ufffd").encode(self._encoding)

    dbapi_connection.adapters.register_dumper(str, NulFreeText)


# Connections a store's engine keeps open when its user does not say: SQLAlchemy's default.
CONNECTIONS = 5


def make_engine(url: str | None = None, *, connections: int = CONNECTIONS) -> Engine:
    """An engine for the store at `url` that keeps `connections` open: as many as its user's
    threads hold at once (a plane: a trial thread per container slot, and its own loops).
    SQLAlchemy closes a connection opened beyond them as soon as it is returned, and
    PostgreSQL forks a server process for each new one, so a pool smaller than the threads
    that share it costs a connection (and a fork) per transaction of the surplus."""
    url = url or database_url()
    pool = {"pool_size": connections, "max_overflow": max(10, connections)}
    if url.startswith("sqlite"):
        if make_url(url).database in (None, "", ":memory:"):
            pool = {}  # one connection per thread (SingletonThreadPool): nothing to size
        engine = create_engine(
            url,
            connect_args={"check_same_thread": False, "timeout": 30},
            json_serializer=json_dumps,
            **pool,
        )
        event.listen(engine, "connect", _sqlite_pragmas)
        return engine
    engine = create_engine(url, pool_pre_ping=True, json_serializer=json_dumps, **pool)
    if engine.dialect.driver == "psycopg":
        event.listen(engine, "connect", _postgres_text)
    return engine


# Any constants: the keys of the PostgreSQL advisory locks below.
MIGRATION_LOCK = 0x6578616D68616C6C
CLAIM_LOCK = MIGRATION_LOCK + 1


def take_turns(connection: Connection, key: int) -> None:
    """Until this transaction ends, hold `key` alone among the store's users (PostgreSQL),
    or be the store's only writer (SQLite; this must be the transaction's first statement)."""
    if connection.dialect.name == "postgresql":
        connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": key})
    elif connection.dialect.name == "sqlite":
        connection.exec_driver_sql("BEGIN IMMEDIATE")


def migrate(engine: Engine) -> None:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    with engine.begin() as connection:
        # Control planes starting together on one database migrate one after the other;
        # the second finds the schema at head.
        take_turns(connection, MIGRATION_LOCK)
        config.attributes["connection"] = connection
        command.upgrade(config, "head")


def session_factory(engine: Engine) -> sessionmaker[Session]:
    return sessionmaker(engine, expire_on_commit=False)


def reading(sessions: sessionmaker[Session]) -> AbstractContextManager[Session]:
    """A session for the reads a control plane repeats many times a second (a peer's
    cancels, the teams' room, the end of a run): it ends with a COMMIT, which reads cost no
    more than a ROLLBACK. psycopg forgets every statement it has prepared on a connection at
    each rollback, so frequent reads that end in one (as a closed session's do) would keep
    every connection of a plane's pool parsing and planning its statements anew."""
    return sessions.begin()
