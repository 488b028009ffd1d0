"""The warm pool's keeper (service/backends/pool_keeper.py), whatever a slot is: the Docker
backend's containers and the Swarm backend's services are tested with real engines in
tests/docker/test_pool.py and tests/swarm/test_swarm_pool.py; here its choices alone, on
slots that are plain records, within the box's room and the teams' (`team_room`)."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest

from service.backends.pool_keeper import Config, PoolKeeper, SlotOps, pool_key


@dataclass
class Fake:
    id: str
    config: Config
    runs: bool = True


class Slots:
    """A backend's slots, as the keeper sees them: started, discarded, still usable."""

    def __init__(self) -> None:
        self.ids = (f"slot-{n}" for n in itertools.count())
        self.live: dict[str, Fake] = {}
        self.lock = threading.Lock()

    def start(self, config: Config) -> Fake:
        slot = Fake(next(self.ids), config)
        with self.lock:
            self.live[slot.id] = slot
        return slot

    def discard(self, slot: Fake) -> None:
        with self.lock:
            self.live.pop(slot.id, None)

    def ops(self) -> SlotOps[Fake]:
        return SlotOps(self.start, self.discard, lambda s: s.runs, lambda s: s.id)


def wait_until(check: Callable[[], bool], timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, "the keeper did not get there in time"
        time.sleep(0.02)


@pytest.fixture
def slots() -> Slots:
    return Slots()


@pytest.fixture
def keeper(slots: Slots) -> Iterator[PoolKeeper[Fake]]:
    keeper = PoolKeeper(slots.ops(), size=1, idle_s=600.0)
    yield keeper
    keeper.close()


def config(memory: int = 1, trial: str = "t") -> Config:
    return {"memory": memory, "labels": {"trial": trial}}


def test_the_key_leaves_out_the_labels_alone() -> None:
    assert pool_key(config(trial="a")) == pool_key(config(trial="b"))
    assert pool_key(config(memory=1)) != pool_key(config(memory=2))


def test_a_miss_teaches_the_key_a_take_hands_out_a_slot_once_and_refills(
    keeper: PoolKeeper[Fake], slots: Slots
) -> None:
    assert keeper.take(config(trial="first"), "first") is None
    wait_until(lambda: keeper.ready() == 1)
    [waiting] = slots.live.values()
    assert keeper.holds(waiting.id)
    taken = keeper.take(config(trial="second"), "second")
    assert taken is waiting and not keeper.holds(waiting.id)
    assert keeper.trial_of(waiting.id) == "second"
    wait_until(lambda: keeper.ready() == 1)  # a new one, never the taken one again
    assert keeper.take(config(trial="third"), "third") not in (None, waiting)
    # Gone from the engine's listing: forgotten.
    keeper.prune(set(), time.monotonic())
    assert keeper.trial_of(waiting.id) is None


def test_a_slot_that_no_longer_serves_is_discarded_not_handed_out(
    keeper: PoolKeeper[Fake], slots: Slots
) -> None:
    keeper.take(config(), "first")
    wait_until(lambda: keeper.ready() == 1)
    [waiting] = slots.live.values()
    waiting.runs = False  # its node drained, or its container ended
    assert keeper.take(config(), "second") is None
    assert waiting.id not in slots.live


def test_the_pool_holds_only_the_room_and_drains_when_idle(slots: Slots) -> None:
    keeper = PoolKeeper(slots.ops(), size=3, idle_s=3.0)
    room = [2]
    keeper.room = lambda: room[0]
    try:
        keeper.take(config(), "first")
        wait_until(lambda: keeper.ready() == 2)
        time.sleep(0.5)
        assert len(slots.live) == 2  # the room, not the size
        room[0] = 1
        wait_until(lambda: len(slots.live) == 1)
        wait_until(lambda: not slots.live)  # no trial asked for it in idle_s
        assert keeper.ready() == 0
    finally:
        keeper.close()


# ----- the teams' caps: what the keeper holds for a capped team's trials ------------------


def settles(check: Callable[[], bool], passes_s: float = 2.5) -> None:
    """`check` holds, and still does a few of the keeper's passes later (one a second)."""
    wait_until(check)
    time.sleep(passes_s)
    assert check()


def test_a_capped_teams_key_is_never_filled_past_its_room(slots: Slots) -> None:
    keeper = PoolKeeper(slots.ops(), size=3, idle_s=600.0)
    keeper.team_room = lambda: {"red": 1}
    try:
        assert keeper.take(config(), "first", "red") is None
        settles(lambda: keeper.ready() == 1 and len(slots.live) == 1)  # the room, not the size
        # Another key of red's shares the same room: nothing more is started for it.
        assert keeper.take(config(memory=2), "second", "red") is None
        settles(lambda: len(slots.live) == 1)
    finally:
        keeper.close()


def test_what_waits_beyond_a_teams_room_is_removed_when_the_room_shrinks(slots: Slots) -> None:
    keeper = PoolKeeper(slots.ops(), size=3, idle_s=600.0)
    rooms = {"red": 2}
    keeper.team_room = lambda: dict(rooms)
    try:
        keeper.take(config(), "first", "red")
        settles(lambda: len(slots.live) == 2)
        rooms["red"] = 1  # a trial of red's claimed, or its cap was lowered
        settles(lambda: len(slots.live) == 1)
        rooms["red"] = 0
        settles(lambda: not slots.live)
        assert keeper.ready() == 0
    finally:
        keeper.close()


def test_a_store_that_cannot_be_read_leaves_no_team_a_slot(
    slots: Slots, caplog: pytest.LogCaptureFixture
) -> None:
    """The keeper outlives the error, holds nothing for a team then (an admin's key, no
    team's, keeps its slots), says so once an outage, and refills once it can read again."""
    keeper = PoolKeeper(slots.ops(), size=2, idle_s=600.0)
    broken = [False]

    def rooms() -> dict[str, int]:
        if broken[0]:
            raise RuntimeError("the store is down")
        return {}

    keeper.team_room = rooms
    try:
        keeper.take(config(memory=1), "red's", "red")
        keeper.take(config(memory=2), "an admin's", None)
        settles(lambda: len(slots.live) == 4)
        broken[0] = True
        settles(lambda: len(slots.live) == 2)
        assert {s.config["memory"] for s in slots.live.values()} == {2}
        warned = [r for r in caplog.records if "could not read the teams' caps" in r.message]
        assert len(warned) == 1
        broken[0] = False
        settles(lambda: len(slots.live) == 4)
    finally:
        keeper.close()


def test_an_uncapped_team_is_bounded_by_the_boxs_room_alone(slots: Slots) -> None:
    keeper = PoolKeeper(slots.ops(), size=3, idle_s=600.0)
    keeper.room = lambda: 2
    keeper.team_room = lambda: {"red": 0}  # blue has no cap: it is absent
    try:
        keeper.take(config(), "first", "blue")
        settles(lambda: len(slots.live) == 2)  # the box's room, not the size
    finally:
        keeper.close()


def test_a_take_prefers_its_teams_slot_then_another_teams_of_the_same_key(
    slots: Slots,
) -> None:
    keeper = PoolKeeper(slots.ops(), size=1, idle_s=600.0)
    try:
        keeper.take(config(), "red's", "red")
        wait_until(lambda: keeper.ready() == 1)
        [reds] = slots.live.values()
        # Blue has none of its own yet: it takes red's, of the same configuration.
        assert keeper.take(config(), "blue's", "blue") is reds
        assert keeper.trial_of(reds.id) == "blue's"
        # Both keys are kept now, one slot each; each team takes its own.
        wait_until(lambda: keeper.ready() == 2)
        assert keeper.take(config(), "blue's 2", "blue") is not None
        assert keeper.ready() == 1
        assert keeper.take(config(memory=2), "red's 2", "red") is None  # another key: none
    finally:
        keeper.close()
