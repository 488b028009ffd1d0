"""Writing a trial's events as they arrive: each payload encoded once, as the JSON column
holds it, while its batch is written with the driver's own bulk path (COPY on PostgreSQL)."""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import functools
import json
from collections.abc import Iterator, Sequence
from json.encoder import c_make_encoder, encode_basestring_ascii  # type: ignore[attr-defined]
from typing import Any

from sqlalchemy import column, insert, table
from sqlalchemy.orm import Session, sessionmaker

from sandbox.protocol import Event
from service.store.checkpoints import database_file, sink_writes
from service.store.db import json_dumps

_COLUMNS = ("trial_id", "seq", "type", "payload")
# The payload as text on the driver's own path: the JSON type would encode it a second time.
_EVENTS_AS_TEXT = table("events", *(column(name) for name in _COLUMNS))

_FIELDS: dict[type, tuple[str, ...]] = {}


def _fields_of(value: Any) -> dict[str, Any]:
    """A dataclass as the JSON encoder's `default` sees it: one level, fields in order (what
    `dataclasses.asdict` gives, which the encoder then descends into itself)."""
    names = _FIELDS.get(type(value))
    if names is None:
        if not dataclasses.is_dataclass(value) or isinstance(value, type):
            raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")
        names = _FIELDS[type(value)] = tuple(f.name for f in dataclasses.fields(value))
    attributes: dict[str, Any] | None = getattr(value, "__dict__", None)
    if attributes is not None and tuple(attributes) == names:
        return attributes  # the fields themselves, in order: the encoder only reads them
    return {name: getattr(value, name) for name in names}


# The JSON column's text exactly as `db.json_dumps` writes it, without first copying the
# event into dicts: the C encoder walks the dataclasses through `default`.
_ENCODER = json.JSONEncoder(allow_nan=False, check_circular=False, default=_fields_of)
# What `JSONEncoder.encode` builds on every call, built once: a tenth of an event's cost.
# No circular check: a payload is parsed JSON or the worker's own dataclasses.
_C_ENCODER = (
    c_make_encoder(
        None,
        _ENCODER.default,
        encode_basestring_ascii,
        _ENCODER.indent,
        _ENCODER.key_separator,
        _ENCODER.item_separator,
        _ENCODER.sort_keys,
        _ENCODER.skipkeys,
        _ENCODER.allow_nan,
    )
    if c_make_encoder is not None
    else None
)


def _encode(value: Any) -> str:
    if _C_ENCODER is None:
        return _ENCODER.encode(value)
    return "".join(_C_ENCODER(value, 0))


def payload_json(event: Any) -> str:
    """An event (a `sandbox.protocol` dataclass) as the text of its payload column."""
    try:
        return _encode(event)
    except ValueError:  # NaN or infinity in what an agent sent: null, as db.json_dumps does
        return json_dumps(_plain(event))


_SCALARS = frozenset({str, int, float, bool, type(None)})


def _plain(value: Any) -> Any:
    """`dataclasses.asdict` without its deep copy of every leaf (events are frozen)."""
    kind = type(value)
    if kind in _SCALARS:
        return value
    if kind is dict:
        return {key: _plain(item) for key, item in value.items()}
    if kind is list or kind is tuple:
        return kind(_plain(item) for item in value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    return copy.deepcopy(value)  # what asdict does with anything else


def insert_events(
    sessions: sessionmaker[Session], trial_id: str, events: Sequence[tuple[int, Event]]
) -> None:
    """Append a trial's (seq, event) pairs in one transaction of their own, on the driver's
    connection: no session, ORM objects or per-row parameter processing, which cost more
    than the writes. Each payload is encoded as its row goes out, so on PostgreSQL the
    server takes in one part of the batch while the next is encoded."""
    with sessions() as session:
        engine = session.get_bind().engine
    copies = engine.dialect.name == "postgresql" and engine.dialect.driver == "psycopg"
    if not copies and engine.dialect.name != "sqlite":
        with sessions.begin() as session:  # any other driver: its own executemany
            insert_in(session, [(trial_id, events)])
        return
    rows = _rows(trial_id, events)
    connection = engine.raw_connection()
    try:
        if copies:
            _copy(connection.driver_connection, rows)
            connection.commit()
        else:
            _insert(connection.driver_connection, database_file(engine), rows)
    finally:
        connection.close()  # back to the pool, rolled back if the write failed


def insert_in(session: Session, trials: Sequence[tuple[str, Sequence[tuple[int, Event]]]]) -> None:
    """Append several trials' (seq, event) pairs in the session's own transaction: a
    trial's last events go with its result (service/store/results.py), so a short trial's
    whole transcript and end take one commit, durable as the result is."""
    if not any(events for _, events in trials):
        return
    rows = (row for trial_id, events in trials for row in _rows(trial_id, events))
    connection = session.connection()
    dialect, dbapi = connection.dialect, connection.connection.driver_connection
    assert dbapi is not None  # an open connection of the session's
    if dialect.name == "postgresql" and dialect.driver == "psycopg":
        _copy(dbapi, rows, durable=True)
    elif dialect.name == "sqlite":  # the session's commit commits these too
        dbapi.executemany(_SQLITE_INSERT, rows)
    else:
        session.execute(
            insert(_EVENTS_AS_TEXT), [dict(zip(_COLUMNS, r, strict=True)) for r in rows]
        )


def _rows(
    trial_id: str, events: Sequence[tuple[int, Event]]
) -> Iterator[tuple[str, int, str, str]]:
    for seq, event in events:
        yield trial_id, seq, event.type, payload_json(event)


_SQLITE_INSERT = "INSERT INTO events (trial_id, seq, type, payload) VALUES (?, ?, ?, ?)"


def _insert(dbapi: Any, path: str | None, rows: Iterator[tuple[str, int, str, str]]) -> None:
    # A file's checkpoints run beside the next batch; SQLite in memory has no log to copy.
    with sink_writes(dbapi, path) if path is not None else contextlib.nullcontext():
        dbapi.executemany(_SQLITE_INSERT, rows)
        dbapi.commit()


def _copy(dbapi: Any, rows: Iterator[tuple[str, int, str, str]], *, durable: bool = False) -> None:
    with dbapi.cursor() as cursor:
        # The driver's own (C) text dumper rather than the connection's NUL-replacing one
        # (`db._postgres_text`), which is a Python call per value: none of these values can
        # hold a NUL (a payload is JSON text, whose encoder escapes every control character;
        # the trial's id is ours and an event's type one of the protocol's literals).
        cursor.adapters.register_dumper(str, _plain_text_dumper())
        # A batch of its own is durable by the time it matters: the trial's result commits
        # synchronously after its last batch, and flushing the WAL to that commit flushes
        # every batch before it. A crash before the result loses only events the restart
        # drops anyway (the trial is queued again without its partial transcript).
        if not durable:  # in the result's own transaction, its commit is the result's
            cursor.execute("SET LOCAL synchronous_commit = off")
        with cursor.copy("COPY events (trial_id, seq, type, payload) FROM STDIN") as copy_in:
            write = copy_in.write_row
            for row in rows:
                write(row)


@functools.cache
def _plain_text_dumper() -> type:
    from psycopg import adapters
    from psycopg.adapt import PyFormat

    dumper: type = adapters.get_dumper(str, PyFormat.TEXT)
    return dumper
