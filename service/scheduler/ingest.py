"""Taking in a running trial's events: buffered, and written in batches."""

from __future__ import annotations

import time

from sqlalchemy.orm import Session, sessionmaker

from sandbox.protocol import Event
from service.scheduler.outages import Outages
from service.store.events import insert_events

# A batch is written at this many events, or with the first event that comes this long after
# the last write: the time bounds how late readers see a running trial's events, the count
# only how much one write carries (each costs round trips and a commit, worth amortising).
EVENT_BATCH = 1000
EVENT_FLUSH_S = 0.25
# After a batch the store refused, the next attempt waits this long (events buffer meanwhile).
RETRY_AFTER_S = 1.0


class EventSink:
    """Buffers a trial's events and writes them in batches.

    With `outages`, a batch the store refuses for a fault of its own (service/store/
    failures.py) stays buffered while the trial runs on, and is written with a later one.
    What is left when the run ends (`rest`) is written with the trial's result, in its
    transaction, which waits for the store (service/scheduler/result_writer.py)."""

    def __init__(
        self, sessions: sessionmaker[Session], trial_id: str, outages: Outages | None = None
    ) -> None:
        self.sessions = sessions
        self.trial_id = trial_id
        self.outages = outages
        self.pending: list[tuple[int, Event]] = []
        self.seq = 0
        self.last_flush = time.monotonic()
        self.retry_at = 0.0  # no batch refused yet

    def __call__(self, event: Event) -> None:
        self.seq += 1
        self.pending.append((self.seq, event))
        now = time.monotonic()
        if now < self.retry_at:
            return
        if len(self.pending) >= EVENT_BATCH or now - self.last_flush > EVENT_FLUSH_S:
            try:
                self.flush()
            except Exception as exc:
                if self.outages is None or self.outages.seen(exc) is None:
                    raise
                # Kept for a later batch: a fault of the store is not the trial's to end.
                self.retry_at = now + RETRY_AFTER_S

    def rest(self) -> list[tuple[int, Event]]:
        """What is still buffered, to be written by the caller with the trial's end
        (service/store/results.py): no longer this sink's to write."""
        rest, self.pending = self.pending, []
        return rest

    def flush(self) -> None:
        if self.pending:
            insert_events(self.sessions, self.trial_id, self.pending)
            self.pending = []
        self.last_flush = time.monotonic()
