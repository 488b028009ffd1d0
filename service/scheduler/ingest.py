"""Taking in a running trial's events: buffered, and written in batches."""

from __future__ import annotations

import time

from sqlalchemy.orm import Session, sessionmaker

from sandbox.protocol import Event
from service.store.events import insert_events

# A batch is written at this many events, or with the first event that comes this long after
# the last write: the time bounds how late readers see a running trial's events, the count
# only how much one write carries (each costs round trips and a commit, worth amortising).
EVENT_BATCH = 1000
EVENT_FLUSH_S = 0.25


class EventSink:
    """Buffers a trial's events and writes them in batches."""

    def __init__(self, sessions: sessionmaker[Session], trial_id: str) -> None:
        self.sessions = sessions
        self.trial_id = trial_id
        self.pending: list[tuple[int, Event]] = []
        self.seq = 0
        self.last_flush = time.monotonic()

    def __call__(self, event: Event) -> None:
        self.seq += 1
        self.pending.append((self.seq, event))
        if len(self.pending) >= EVENT_BATCH or time.monotonic() - self.last_flush > EVENT_FLUSH_S:
            self.flush()

    def flush(self) -> None:
        if self.pending:
            insert_events(self.sessions, self.trial_id, self.pending)
            self.pending = []
        self.last_flush = time.monotonic()
