"""Trials' ends written together: one transaction for the ends that arrive while the last
was being written.

Every trial's end locks its job's counts row until its transaction commits
(service/store/results.py), so a job's ends take turns, on one plane and across planes; a
turn is several round trips to the store. A plane writes its trials' ends from one thread of
its own: the ends that arrive while one transaction is written wait for the next, and are
written in it together, so a job's counts row is locked once for them all. A lone end is
written at once, as before; a busy plane writes fewer, larger transactions.

Each trial's thread still waits for its own end to be committed, and learns as before
whether it was recorded (its job's id) or not ours to record (None). One end that the store
refuses (not a fault of the store's, which is waited out) would refuse the whole
transaction: the ends of that one are then written one by one, so that only its own trial
sees the error.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field

from sqlalchemy.orm import Session, sessionmaker

from service.scheduler.outages import Outages
from service.store.results import Ended, record_results

# The most ends in one transaction: enough to lock a job's counts once for a busy plane's
# slots ending together, few enough that one transaction stays short.
MOST = 32


@dataclass
class _Waiting:
    ended: Ended
    done: threading.Event = field(default_factory=threading.Event)
    job_id: str | None = None
    error: BaseException | None = None


class ResultWriter:
    def __init__(self, sessions: sessionmaker[Session], owner: str, outages: Outages) -> None:
        self.sessions = sessions
        self.owner = owner
        self.outages = outages
        self._pending: list[_Waiting] = []
        self._ready = threading.Condition()
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="examhall-results", daemon=True)
        self._thread.start()

    def write(self, ended: Ended) -> str | None:
        """Record one trial's end (waiting out the store's faults, as `Outages.until_written`
        does); its job's id, or None when its end was not ours to record."""
        waiting = _Waiting(ended)
        with self._ready:
            if self._closed:
                raise RuntimeError("the plane is stopping: its results are no longer written")
            self._pending.append(waiting)
            self._ready.notify()
        waiting.done.wait()
        if waiting.error is not None:
            raise waiting.error
        return waiting.job_id

    def close(self) -> None:
        """Write what is pending, then stop."""
        with self._ready:
            self._closed = True
            self._ready.notify()
        self._thread.join(timeout=60)

    def _run(self) -> None:
        while True:
            with self._ready:
                while not self._pending and not self._closed:
                    self._ready.wait()
                if not self._pending:
                    return  # closed, and nothing left
                batch, self._pending = self._pending[:MOST], self._pending[MOST:]
            self._write(batch)

    def _write(self, batch: Sequence[_Waiting]) -> None:
        try:
            job_ids = self.outages.until_written(
                lambda: record_results(self.sessions, self.owner, [w.ended for w in batch])
            )
        except Exception as exc:
            if len(batch) > 1:
                for one in batch:  # the one the store refuses fails alone
                    self._write([one])
                return
            batch[0].error = exc
            batch[0].done.set()
            return
        for waiting, job_id in zip(batch, job_ids, strict=True):
            waiting.job_id = job_id
            waiting.done.set()
