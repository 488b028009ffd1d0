"""Taking in a running trial's events: buffered, and written in batches."""

from __future__ import annotations

import copy
import dataclasses
import time
from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from sandbox.protocol import Event
from service.store.events import insert_events

EVENT_BATCH = 200
EVENT_FLUSH_S = 0.25


class EventSink:
    """Buffers a trial's events and writes them in batches, as plain rows."""

    def __init__(self, sessions: sessionmaker[Session], trial_id: str) -> None:
        self.sessions = sessions
        self.trial_id = trial_id
        self.pending: list[dict[str, Any]] = []
        self.seq = 0
        self.last_flush = time.monotonic()

    def __call__(self, event: Event) -> None:
        self.seq += 1
        self.pending.append(
            {
                "trial_id": self.trial_id,
                "seq": self.seq,
                "type": event.type,
                "payload": plain(event),
            }
        )
        if len(self.pending) >= EVENT_BATCH or time.monotonic() - self.last_flush > EVENT_FLUSH_S:
            self.flush()

    def flush(self) -> None:
        if self.pending:
            insert_events(self.sessions, self.pending)
            self.pending = []
        self.last_flush = time.monotonic()


_SCALARS = frozenset({str, int, float, bool, type(None)})


def plain(value: Any) -> Any:
    """`dataclasses.asdict` without its deep copy of every leaf: the same dicts, lists and
    tuples, sharing the immutable scalars (events are frozen and only serialised)."""
    kind = type(value)
    if kind in _SCALARS:
        return value
    if kind is dict:
        return {key: plain(item) for key, item in value.items()}
    if kind is list or kind is tuple:
        return kind(plain(item) for item in value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    return copy.deepcopy(value)  # what asdict does with anything else
