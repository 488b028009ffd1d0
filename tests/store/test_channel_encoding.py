"""The channel's encoding is total: no str or bytes value an agent can produce makes the
worker's encoder, the control plane's parser or the store's write raise. Property-style:
thousands of generated values, seeded, through the real code on both sides."""

from __future__ import annotations

import random
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from sandbox.protocol import (
    EventMessage,
    MessageEvent,
    ToolCall,
    ToolCallEvent,
    ToolResultEvent,
    encode,
)
from service.launch.worker_lines import parse_worker_line
from service.scheduler import EventSink
from service.store.models import Event as EventRow
from service.store.models import Trial
from tests.store.conftest import submit

# Ranges an agent's text may draw from: ASCII controls and NUL, the surrogates (lone, from a
# file name that is not UTF-8 or a cut-off model message), the BMP, and astral planes.
RANGES = [(0, 0x1F), (0x20, 0x7E), (0xD800, 0xDFFF), (0x80, 0xFFFF), (0x10000, 0x10FFFF)]


def agent_text(rng: random.Random) -> str:
    if rng.random() < 0.2:  # what os.listdir makes of a name in another encoding
        return bytes(rng.randrange(256) for _ in range(rng.randrange(12))).decode(
            "utf-8", "surrogateescape"
        )
    chars = []
    for _ in range(rng.randrange(24)):
        low, high = rng.choice(RANGES)
        chars.append(chr(rng.randint(low, high)))
    return "".join(chars)


def agent_value(rng: random.Random, depth: int = 0) -> Any:
    choice = rng.randrange(8 if depth < 3 else 5)
    if choice == 0:
        return agent_text(rng)
    if choice == 1:
        return rng.choice([float("nan"), float("inf"), -float("inf"), 1e308, -0.0, 2**70])
    if choice == 2:
        return bytes(rng.randrange(256) for _ in range(rng.randrange(8)))
    if choice == 3:
        return rng.choice([None, True, False, 0, -1])
    if choice == 4:
        return object()
    if choice == 5:
        return [agent_value(rng, depth + 1) for _ in range(rng.randrange(4))]
    if choice == 6:
        return (agent_value(rng, depth + 1), agent_text(rng))
    return {
        rng.choice([agent_text(rng), 7, (1, "x"), None]): agent_value(rng, depth + 1)
        for _ in range(rng.randrange(4))
    }


def agent_event(rng: random.Random) -> Any:
    kind = rng.randrange(3)
    if kind == 0:
        calls = [ToolCall(agent_text(rng), agent_text(rng), {"a": agent_value(rng)})]
        return MessageEvent(role="assistant", content=agent_text(rng), tool_calls=calls)
    if kind == 1:
        return ToolCallEvent(agent_text(rng), agent_text(rng), {agent_text(rng): agent_value(rng)})
    return ToolResultEvent(agent_text(rng), "ls", agent_text(rng), error=agent_text(rng))


@pytest.mark.parametrize("seed", range(4))
def test_any_agent_value_crosses_the_channel_into_the_store(
    sessions: sessionmaker[Session], seed: int
) -> None:
    rng = random.Random(seed)
    job = submit(sessions, cases=["create-greeting"])
    with sessions() as session:
        trial_id = session.scalars(select(Trial.id).where(Trial.job_id == job.id)).one()
    sink = EventSink(sessions, trial_id)
    sent = []
    for seq in range(1, 1501):
        line = encode(EventMessage(seq=seq, event=agent_event(rng)))  # never raises
        assert line.endswith(b"\n") and b"\n" not in line[:-1]
        line.decode("utf-8")  # strict: the worker writes only real UTF-8
        message = parse_worker_line(line)  # and the control plane accepts every line
        assert isinstance(message, EventMessage)
        sink(message.event)
        sent.append(message.event)
    sink.flush()
    with sessions() as session:
        rows = session.scalars(
            select(EventRow).where(EventRow.trial_id == trial_id).order_by(EventRow.seq)
        ).all()
    assert [row.type for row in rows] == [event.type for event in sent]
    assert len(rows) == len(sent)


def test_escapes_keep_what_the_agent_wrote_visible() -> None:
    name = b"bad-\xff.txt".decode("utf-8", "surrogateescape")
    line = encode(ToolResultEvent("1", "ls", name))
    assert (
        "bad-\\udcff.txt"
        in parse_worker_line(
            encode(EventMessage(seq=1, event=ToolResultEvent("1", "ls", name)))
        ).event.content
    )  # type: ignore[union-attr]
    assert b"\\\\udcff" in line
