"""The keeper of a warm pool, whatever its slots are: a container on the Docker backend
(service/backends/docker/pool.py), a one-replica service on the Swarm backend
(service/backends/swarm/pool.py). What a slot is and how it starts, runs and goes, the
backend says (`SlotOps`); which configurations to keep, how many, within what room and for
how long is decided here, once for both.

Slots are keyed by a trial's sandbox configuration without its labels (`pool_key`), so a
trial takes only a slot it could have started itself. A slot is taken once and never
returned; the trial's removal of its sandbox removes it. Which trial took it the keeper
remembers (`trial_of`), since a slot's labels are set when it starts and cannot change: the
reaper counts it as that trial's, and spares the untaken ones (`holds`).

The pool counts against the box's cap: it fills only while `room()` (the box's free
sandbox slots, as the scheduler counts them) is above what it holds, and a trial whose
configuration has no slot, when the pool holds more than the room left with that trial
counted, first removes a slot of another configuration. It learns which configurations to
keep from the trials that start, refills after each take in the background, and drains a
configuration to zero once no trial asked for it for `idle_s`.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from service.backends.base import POOL_PREFIX
from service.backends.docker.hardening import LABEL_JOB, LABEL_POOL, LABEL_TRIAL

log = logging.getLogger(__name__)

# After a slot could not be started (the engine refused, or is down): how long the pool waits
# before it tries again, so that a broken engine is not asked in a loop.
RETRY_AFTER_S = 5.0

Config = dict[str, Any]
S = TypeVar("S")


def pool_key(config: Config) -> str:
    """What a trial's sandbox is, without the labels that name its trial: two configs of
    one key make sandboxes that differ in their labels alone."""
    shaped = {k: v for k, v in config.items() if k != "labels"}
    text = json.dumps(shaped, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def slot_labels(labels: dict[str, str]) -> dict[str, str]:
    """A slot's labels: the owner's and a test run's scope, as a trial's own sandbox has
    them, under a trial id that names no trial, so that the reaper finds it like any sandbox
    and tells it apart (service/scheduler/loop.py)."""
    return {
        **labels,
        LABEL_TRIAL: f"{POOL_PREFIX}{uuid.uuid4().hex[:12]}",
        LABEL_JOB: "pool",
        LABEL_POOL: "1",
    }


@dataclass(frozen=True)
class SlotOps(Generic[S]):
    """What a backend's slot is to the keeper."""

    # A started slot of a config, its worker waiting for its request; raises on failure and
    # leaves nothing behind.
    start: Callable[[Config], S]
    # Remove a slot; never raises.
    discard: Callable[[S], None]
    # Whether a slot can still serve a trial (its sandbox runs, its machine is up).
    usable: Callable[[S], bool]
    # The id the reaper lists it under.
    ident: Callable[[S], str]


@dataclass
class _Wanted(Generic[S]):
    config: Config
    last_asked: float
    ready: list[S] = field(default_factory=list)
    starting: int = 0


class PoolKeeper(Generic[S]):
    def __init__(self, ops: SlotOps[S], *, size: int, idle_s: float) -> None:
        self.ops = ops
        self.size = size
        self.idle_s = idle_s
        # The box's free sandbox slots; the scheduler sets it (`limit_pool`). Unset, the pool
        # is bounded by its size alone (a launcher with no scheduler, e.g. a bench).
        self.room: Callable[[], int] | None = None
        self._wanted: dict[str, _Wanted[S]] = {}
        # Slot id -> the trial that took it and when, until the reaper no longer finds it
        # (`prune`): kept past the trial's own removal of it, so that one the engine failed
        # to remove is still known as that trial's, which the reaper removes.
        self._taken: dict[str, tuple[str, float]] = {}
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._closed = threading.Event()
        self._retry_at = 0.0
        self._thread = threading.Thread(target=self._keep, name="examhall-pool", daemon=True)
        self._thread.start()

    # ----- what the backend asks --------------------------------------------------------

    def take(self, config: Config, trial_id: str) -> S | None:
        """A started slot of `config`'s key for `trial_id`, or None (then the trial starts
        its own sandbox, and the pool learns to keep this key). Never raises."""
        key = pool_key(config)
        now = time.monotonic()
        evict: list[S] = []
        slot = None
        with self._lock:
            wanted = self._wanted.get(key)
            if wanted is None:
                wanted = self._wanted[key] = _Wanted(config, now)
            wanted.last_asked = now
            if wanted.ready:
                slot = wanted.ready.pop(0)
                self._taken[self.ops.ident(slot)] = (trial_id, now)
            elif self._room() < self._held():
                # The trial's own sandbox needs a place the pool holds (the room already
                # counts the trial, as the scheduler holds its slot): give one back.
                for other in self._wanted.values():
                    if other.ready:
                        evict.append(other.ready.pop())
                        break
        for old in evict:
            self.ops.discard(old)
        self._wake.set()  # refill
        if slot is not None and not self._usable(slot):
            self.ops.discard(slot)
            return None
        return slot

    def trial_of(self, slot_id: str) -> str | None:
        """The trial that took this slot, if it came from this pool."""
        with self._lock:
            taken = self._taken.get(slot_id)
        return taken[0] if taken is not None else None

    def prune(self, listed: set[str], listed_at: float) -> None:
        """Forget the taken slots gone from the engine's listing made at `listed_at` (one
        taken after it may be missing from it and is kept)."""
        with self._lock:
            for sid, (_, taken_at) in list(self._taken.items()):
                if sid not in listed and taken_at < listed_at:
                    del self._taken[sid]

    def holds(self, slot_id: str) -> bool:
        """Whether an untaken slot of this pool has that id: the reaper keeps it."""
        with self._lock:
            return any(self.ops.ident(s) == slot_id for w in self._wanted.values() for s in w.ready)

    def ready(self) -> int:
        """How many started slots wait for a trial."""
        with self._lock:
            return sum(len(w.ready) for w in self._wanted.values())

    def close(self, remove: bool = True) -> None:
        """Stop filling and remove every untaken slot (the plane stops). With `remove`
        False the slots stay, as a plane that dies leaves them (for the tests of the
        reaper that removes them)."""
        self._closed.set()
        self._wake.set()
        self._thread.join(30)
        if remove:
            self._drain(asked_before=float("inf"))

    # ----- the background keeper ----------------------------------------------------------

    def _usable(self, slot: S) -> bool:
        try:
            return self.ops.usable(slot)
        except Exception:  # whatever cannot be asked cannot be handed out
            return False

    def _room(self) -> int:
        return self.room() if self.room is not None else self.size * max(1, len(self._wanted))

    def _held(self) -> int:
        return sum(len(w.ready) + w.starting for w in self._wanted.values())

    def _keep(self) -> None:
        while not self._closed.is_set():
            self._wake.wait(min(1.0, self.idle_s / 4))
            self._wake.clear()
            if self._closed.is_set():
                return
            now = time.monotonic()
            self._drain(asked_before=now - self.idle_s)
            self._trim()
            if now >= self._retry_at:
                self._fill()

    def _drain(self, asked_before: float) -> None:
        """Remove the slots of every key no trial asked for since `asked_before`."""
        with self._lock:
            gone = [
                k
                for k, w in self._wanted.items()
                if w.last_asked < asked_before and w.starting == 0
            ]
            slots = [s for k in gone for s in self._wanted.pop(k).ready]
        for slot in slots:
            self.ops.discard(slot)

    def _trim(self) -> None:
        """Give back what the pool holds beyond the room: trials claimed the box's slots
        while a slot of the pool was starting."""
        with self._lock:
            excess = self._held() - self._room()
            extra = []
            for wanted in self._wanted.values():
                while excess > 0 and wanted.ready:
                    extra.append(wanted.ready.pop())
                    excess -= 1
        for slot in extra:
            self.ops.discard(slot)

    def _fill(self) -> None:
        while not self._closed.is_set():
            with self._lock:
                if self._held() >= self._room():
                    return
                short = [w for w in self._wanted.values() if len(w.ready) + w.starting < self.size]
                if not short:
                    return
                # The most recently asked for first: the queue's next trials are likeliest
                # to need it.
                wanted = max(short, key=lambda w: w.last_asked)
                wanted.starting += 1
            slot = None
            try:
                slot = self.ops.start(wanted.config)
            except Exception as exc:
                log.warning("the pool could not start a sandbox (%s); tried again later", exc)
                self._retry_at = time.monotonic() + RETRY_AFTER_S
            finally:
                with self._lock:
                    wanted.starting -= 1
                    kept = slot is not None and any(w is wanted for w in self._wanted.values())
                    if kept and slot is not None:
                        wanted.ready.append(slot)
            if slot is not None and not kept:
                self.ops.discard(slot)  # its key was drained meanwhile
            if slot is None:
                return


class KeepsPoolOf:
    """A backend's side of the scheduler's `KeepsPool` (service/backends/base.py), for a
    backend whose `pool` is a PoolKeeper, or None when it keeps none."""

    pool: PoolKeeper[Any] | None

    def limit_pool(self, room: Callable[[], int]) -> None:
        if self.pool is not None:
            self.pool.room = room

    def close_pool(self) -> None:
        if self.pool is not None:
            self.pool.close()
