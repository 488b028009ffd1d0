"""The event sink writes on the driver's own path (COPY on PostgreSQL, executemany on
SQLite): what it stores is what the JSON column stored before, a failed batch leaves
nothing behind, and the connection goes back to the pool as it came."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import pytest
from sqlalchemy import Engine, select, text
from sqlalchemy.orm import Session, sessionmaker

from sandbox.protocol import (
    Event,
    LifecycleEvent,
    MessageEvent,
    ToolCall,
    ToolCallEvent,
    ToolResultEvent,
    Usage,
)
from service.scheduler import EventSink
from service.store.db import json_dumps
from service.store.models import Event as EventRow
from service.store.models import Trial
from tests.store.conftest import submit


@dataclass(frozen=True, slots=True)
class _Slotted:  # a dataclass without __dict__, inside what a tool returned
    name: str
    values: tuple[Any, ...]


ODD: list[Event] = [
    MessageEvent(
        role="assistant",
        content='naïve ✓ \U0001f9ea "q" \\ \n\t \x00 \ud800 end',
        tool_calls=[ToolCall("c1", "write", {"path": "a", "lines": [1, 2.5, None, True]})],
        stop_reason="tool_use",
        model="sim-1",
        usage=Usage(10, 5, 1, 2, 3),
    ),
    MessageEvent(role="user", content=""),
    ToolCallEvent(
        id="c2",
        name="x",
        arguments={"nan": float("nan"), "inf": [float("-inf")], "t": (1, "two"), "k": {}},
    ),
    ToolCallEvent(id="c3", name="y", arguments={"s": _Slotted("n", (1, _Slotted("m", ())))}),
    ToolResultEvent(tool_call_id="c2", name="x", content="line\n" * 300, error="boom"),
    LifecycleEvent(step="judge"),
]


def _trial(sessions: sessionmaker[Session]) -> str:
    job = submit(sessions, cases=["create-greeting"])
    with sessions() as session:
        return session.scalars(select(Trial.id).where(Trial.job_id == job.id)).one()


def _stored_text(sessions: sessionmaker[Session], trial_id: str) -> list[tuple[int, str, str]]:
    with sessions() as session:
        cast = "payload::text" if session.get_bind().dialect.name == "postgresql" else "payload"
        rows = session.execute(
            text(f"SELECT seq, type, {cast} FROM events WHERE trial_id = :t ORDER BY seq"),
            {"t": trial_id},
        )
        return [(int(seq), kind, payload) for seq, kind, payload in rows]


def test_payloads_are_stored_as_the_json_column_wrote_them(
    sessions: sessionmaker[Session],
) -> None:
    trial_id = _trial(sessions)
    sink = EventSink(sessions, trial_id)
    for event in ODD:
        sink(event)
    sink.flush()
    # The text, not only the value: what SQLAlchemy's JSON type wrote for the dict
    # dataclasses.asdict gives (NaN and infinity as null, everything else as json.dumps).
    expected = [
        (seq, event.type, json_dumps(dataclasses.asdict(event)))
        for seq, event in enumerate(ODD, start=1)
    ]
    assert _stored_text(sessions, trial_id) == expected
    with sessions() as session:
        payloads = session.scalars(
            select(EventRow.payload).where(EventRow.trial_id == trial_id).order_by(EventRow.seq)
        ).all()
    assert payloads[2]["arguments"] == {"nan": None, "inf": [None], "t": [1, "two"], "k": {}}
    assert payloads[3]["arguments"] == {
        "s": {"name": "n", "values": [1, {"name": "m", "values": []}]}
    }


def test_a_failed_batch_leaves_nothing_and_the_next_one_is_written(
    sessions: sessionmaker[Session],
) -> None:
    trial_id = _trial(sessions)
    sink = EventSink(sessions, trial_id)
    for n in range(3):
        sink(LifecycleEvent(step=f"first-{n}"))
    sink.flush()
    # A second writer of the same transcript: its batch holds seq 1 and 2 again.
    intruder = EventSink(sessions, trial_id)
    intruder(LifecycleEvent(step="again-1"))
    intruder(LifecycleEvent(step="again-2"))
    with pytest.raises(Exception, match=r"(?i)unique"):
        intruder.flush()
    for n in range(3, 5):
        sink(LifecycleEvent(step=f"first-{n}"))
    sink.flush()
    stored = _stored_text(sessions, trial_id)
    assert [seq for seq, _, _ in stored] == [1, 2, 3, 4, 5]
    assert all("first-" in payload for _, _, payload in stored)


def test_batches_commit_without_leaving_their_settings_on_the_connection(
    engine: Engine, sessions: sessionmaker[Session]
) -> None:
    if engine.dialect.name != "postgresql":
        pytest.skip("synchronous_commit is PostgreSQL's")
    trial_id = _trial(sessions)
    engine.dispose()  # from here on, the sink's connection is the pool's only one
    sink = EventSink(sessions, trial_id)
    sink(LifecycleEvent(step="one"))
    sink.flush()
    assert engine.pool.checkedin() == 1
    with engine.connect() as connection:
        # SET LOCAL: the batch's transaction alone commits asynchronously.
        assert connection.exec_driver_sql("SHOW synchronous_commit").scalar() == "on"
    assert len(_stored_text(sessions, trial_id)) == 1
