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

The pool counts against the box's cap and the teams': it fills only while `room()` (the
box's free sandbox slots, as the scheduler counts them) is above what it holds, and a trial
whose configuration has no slot, when the pool holds more than the room left with that trial
counted, first removes a slot of another configuration. It learns which configurations to
keep, and for which team (None: an admin's jobs), from the trials that start: a slot waits
for a configuration and a team, so that what it holds for a capped team stays within what
that team may still start box-wide (`team_room()`, read once a pass of the keeper and when
a trial of the team starts in a sandbox the pool did not count as the team's). A slot held
for one team may still serve another's trial of the same configuration: that trial was
claimed within its own team's cap. The pool refills after each take in the background,
removes what it holds beyond either room, and drains a configuration to zero once no trial
asked for it for `idle_s`.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
import uuid
from collections.abc import Callable, Mapping
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
    # The team whose trials asked for this configuration (None: an admin's jobs, which no
    # team cap bounds): what the pool holds here counts against that team's room.
    team: str | None
    last_asked: float
    ready: list[S] = field(default_factory=list)
    starting: int = 0

    @property
    def held(self) -> int:
        return len(self.ready) + self.starting


# Each capped team's room, as `team_room()` gave it for one pass; a team absent is uncapped.
TeamRooms = Mapping[str, int]


class PoolKeeper(Generic[S]):
    def __init__(self, ops: SlotOps[S], *, size: int, idle_s: float) -> None:
        self.ops = ops
        self.size = size
        self.idle_s = idle_s
        # The box's free sandbox slots; the scheduler sets it (`limit_pool`). Unset, the pool
        # is bounded by its size alone (a launcher with no scheduler, e.g. a bench).
        self.room: Callable[[], int] | None = None
        # The sandboxes each capped team may still start box-wide, from the store; the
        # scheduler sets it too. Unset, no team is capped.
        self.team_room: Callable[[], TeamRooms] | None = None
        # (pool_key, team) -> what the pool keeps for that team's trials of that key.
        self._wanted: dict[tuple[str, str | None], _Wanted[S]] = {}
        # Slot id -> the trial that took it and when, until the reaper no longer finds it
        # (`prune`): kept past the trial's own removal of it, so that one the engine failed
        # to remove is still known as that trial's, which the reaper removes.
        self._taken: dict[str, tuple[str, float]] = {}
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._closed = threading.Event()
        self._retry_at = 0.0
        self._rooms_unread = False
        self._thread = threading.Thread(target=self._keep, name="examhall-pool", daemon=True)
        self._thread.start()

    # ----- what the backend asks --------------------------------------------------------

    def take(self, config: Config, trial_id: str, team: str | None = None) -> S | None:
        """A started slot of `config`'s key for `trial_id` of `team`, or None (then the
        trial starts its own sandbox, and the pool learns to keep this key for `team`).
        Never raises."""
        key = pool_key(config)
        now = time.monotonic()
        slot = None
        with self._lock:
            wanted = self._wanted.get((key, team))
            if wanted is None:
                wanted = self._wanted[(key, team)] = _Wanted(config, team, now)
            wanted.last_asked = now
            # The team's own slot first; else one held for another team's trials.
            alike = (w for (k, _), w in self._wanted.items() if k == key)
            source = next((w for w in (wanted, *alike) if w.ready), None)
            if source is not None:
                slot = source.ready.pop(0)
                self._taken[self.ops.ident(slot)] = (trial_id, now)
            # A trial not in a slot held for its team runs one sandbox more than the pool
            # counted against that team (the queue counted it already): its other slots may
            # now be beyond its room.
            recount = team is not None and source is not wanted and self._held_for(team) > 0
        rooms = self._team_rooms() if recount else {}
        # The box's room already counts the trial, as the scheduler holds its slot: when its
        # own sandbox needs a place the pool holds, the pool gives one back.
        for old in self._excess(rooms):
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
        return sum(w.held for w in self._wanted.values())

    def _held_for(self, team: str | None) -> int:
        return sum(w.held for w in self._wanted.values() if w.team == team)

    def _team_has_room(self, team: str | None, rooms: TeamRooms) -> bool:
        room = rooms.get(team) if team is not None else None
        return room is None or self._held_for(team) < room

    def _team_rooms(self) -> TeamRooms:
        """The capped teams' rooms, asked once for a pass (a read of the store). When it
        cannot be read, every team the pool keeps slots for has none: a team's cap may have
        been lowered, and a slot given back is only a slower start."""
        with self._lock:
            teams = {w.team for w in self._wanted.values() if w.team is not None}
        if not teams or self.team_room is None:
            return {}
        try:
            rooms = dict(self.team_room())
        except Exception as exc:
            # Once an outage, not once a pass: the scheduler names the store's faults.
            if not self._rooms_unread:
                log.warning("the pool could not read the teams' caps (%s); none held for them", exc)
            self._rooms_unread = True
            return dict.fromkeys(teams, 0)
        self._rooms_unread = False
        return rooms

    def _keep(self) -> None:
        while not self._closed.is_set():
            self._wake.wait(min(1.0, self.idle_s / 4))
            self._wake.clear()
            if self._closed.is_set():
                return
            try:
                self._pass()
            except Exception:
                # A pool that stopped keeping would hold its slots past every room.
                log.exception("the pool's pass failed; it tries again")

    def _pass(self) -> None:
        now = time.monotonic()
        self._drain(asked_before=now - self.idle_s)
        rooms = self._team_rooms()
        for slot in self._excess(rooms):
            self.ops.discard(slot)
        if now >= self._retry_at:
            self._fill(rooms)

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

    def _excess(self, rooms: TeamRooms) -> list[S]:
        """Take out (for the caller to discard) the slots held beyond a capped team's room
        or the box's: trials claimed slots while the pool's were starting, or a team's cap
        was lowered."""
        extra: list[S] = []
        with self._lock:
            for team, room in rooms.items():
                excess = self._held_for(team) - room
                for wanted in self._wanted.values():
                    while excess > 0 and wanted.team == team and wanted.ready:
                        extra.append(wanted.ready.pop())
                        excess -= 1
            excess = self._held() - self._room()
            for wanted in self._wanted.values():
                while excess > 0 and wanted.ready:
                    extra.append(wanted.ready.pop())
                    excess -= 1
        return extra

    def _fill(self, rooms: TeamRooms) -> None:
        while not self._closed.is_set():
            with self._lock:
                if self._held() >= self._room():
                    return
                short = [
                    w
                    for w in self._wanted.values()
                    if w.held < self.size and self._team_has_room(w.team, rooms)
                ]
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

    def limit_pool(
        self, room: Callable[[], int], team_room: Callable[[], TeamRooms] | None = None
    ) -> None:
        if self.pool is not None:
            self.pool.room = room
            self.pool.team_room = team_room

    def close_pool(self) -> None:
        if self.pool is not None:
            self.pool.close()
