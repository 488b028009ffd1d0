"""The box's build slots, shared by its teams as the queue shares trials: by their shares.

A control plane builds at most EXAMHALL_BUILD_CONCURRENCY environments at once. The slots go
round the teams with builds waiting by stride scheduling: each grant moves its team's pass on
by 1/share, and a free slot goes to the waiting build whose team's pass is lowest (the longest
waiting first among equals). A team that starts waiting joins at the current pass, so an idle
team banks no turns, and a busy one cannot take them back to back: a team whose builds are
slow or hang holds another team's next build for at most one build's turn, however many of
its own it has queued, when their shares are equal (a share of s takes s turns to 1).
Builds outside any team (an admin's job, a check on the box) are one lane of their own.
"""

from __future__ import annotations

import itertools
import threading
from collections import Counter
from dataclasses import dataclass, field

WAIT_POLL_S = 0.5  # how often a waiting build looks at its cancel


@dataclass(frozen=True)
class Lane:
    """Whose build it is: a team's id (None: no team's) and its share of the slots."""

    team: str | None = None
    share: int = 1


NO_LANE = Lane()


@dataclass(eq=False)
class _Waiter:
    lane: Lane
    seq: int


@dataclass
class FairSlots:
    capacity: int
    _cond: threading.Condition = field(default_factory=threading.Condition)
    _running: Counter[str | None] = field(default_factory=Counter)
    _waiting: list[_Waiter] = field(default_factory=list)
    _seq: itertools.count[int] = field(default_factory=itertools.count)
    # Stride scheduling's passes, by team, and the pass of the last grant.
    _pass: dict[str | None, float] = field(default_factory=dict)
    _now: float = 0.0

    def try_acquire(self, lane: Lane) -> bool:
        """A slot now, if one is free and no build waits before this one."""
        with self._cond:
            waiter = self._arrive(lane)
            if waiter in self._granted():
                self._take(waiter)
                return True
            self._waiting.remove(waiter)
            return False

    def acquire(self, lane: Lane, cancel: threading.Event | None = None) -> bool:
        """Wait for this lane's turn at a slot; False when `cancel` was set first."""
        with self._cond:
            waiter = self._arrive(lane)
            granted = False
            try:
                while not (cancel is not None and cancel.is_set()):
                    if waiter in self._granted():
                        self._take(waiter)
                        granted = True
                        return True
                    self._cond.wait(WAIT_POLL_S)
                return False
            finally:
                if not granted:
                    self._waiting.remove(waiter)
                    self._cond.notify_all()

    def release(self, lane: Lane) -> None:
        with self._cond:
            self._running[lane.team] -= 1
            self._cond.notify_all()

    def running(self) -> dict[str | None, int]:
        """Slots held, by team (for tests and the page of the box)."""
        with self._cond:
            return {team: count for team, count in self._running.items() if count}

    # -- internals

    def _arrive(self, lane: Lane) -> _Waiter:
        team = lane.team
        if not any(w.lane.team == team for w in self._waiting) and not self._running[team]:
            # A team that was idle joins now: the turns it did not take are not kept.
            self._pass[team] = max(self._pass.get(team, self._now), self._now)
        else:
            self._pass.setdefault(team, self._now)
        waiter = _Waiter(lane, next(self._seq))
        self._waiting.append(waiter)
        return waiter

    def _take(self, waiter: _Waiter) -> None:
        self._waiting.remove(waiter)
        team = waiter.lane.team
        self._running[team] += 1
        self._now = max(self._now, self._pass[team])
        self._pass[team] += 1 / max(1, waiter.lane.share)
        self._cond.notify_all()

    def _granted(self) -> list[_Waiter]:
        """The waiters the free slots go to now, as _take would give them one by one."""
        free = self.capacity - sum(self._running.values())
        passes = dict(self._pass)
        waiting = list(self._waiting)
        granted: list[_Waiter] = []
        for _ in range(max(0, free)):
            if not waiting:
                break
            chosen = min(waiting, key=lambda w: (passes[w.lane.team], w.seq))
            granted.append(chosen)
            waiting.remove(chosen)
            passes[chosen.lane.team] += 1 / max(1, chosen.lane.share)
        return granted


_lock = threading.Lock()
_slots: dict[int, FairSlots] = {}


def build_slots(capacity: int) -> FairSlots:
    """The process's build slots of `capacity` (EXAMHALL_BUILD_CONCURRENCY): one set, shared
    by every builder of the process that has that setting."""
    with _lock:
        return _slots.setdefault(capacity, FairSlots(capacity))
