"""The box's build slots, shared by teams (service/environments/build_slots.py), with real
threads: a team's queue of builds holds another team's next one for one build's turn at
most, shares weigh the turns, an idle team banks none, and a cancelled wait takes none."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from service.environments.build_slots import FairSlots, Lane

A, B = Lane("team-a"), Lane("team-b")


class Builds:
    """Builds that wait for a slot on threads of their own, in the order they are started,
    and hold it until told to finish."""

    def __init__(self, slots: FairSlots) -> None:
        self.slots = slots
        self.granted: list[str] = []
        self._done: dict[str, threading.Event] = {}
        self._lock = threading.Lock()

    def start(self, name: str, lane: Lane) -> None:
        waiting = len(self.slots._waiting)
        done = self._done[name] = threading.Event()

        def build() -> None:
            assert self.slots.acquire(lane)
            with self._lock:
                self.granted.append(name)
            done.wait(10)
            self.slots.release(lane)

        threading.Thread(target=build, daemon=True).start()
        _until(lambda: len(self.slots._waiting) > waiting or name in self.granted)

    def finish(self, name: str) -> None:
        count = len(self.granted)
        self._done[name].set()
        _until(lambda: len(self.granted) > count or not self.slots._waiting)


def _until(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 5
    while not condition():
        assert time.monotonic() < deadline, "the slots never got there"
        time.sleep(0.005)


def test_a_teams_queue_holds_another_team_for_one_turn_at_most() -> None:
    builds = Builds(FairSlots(1))
    for name in ("a1", "a2", "a3"):
        builds.start(name, A)
    builds.start("b1", B)  # waits behind a1 only, though a2 and a3 waited longer
    for name in ("a1", "b1", "a2"):
        builds.finish(name)
    assert builds.granted == ["a1", "b1", "a2", "a3"]
    builds.finish("a3")


def test_two_slots_run_both_teams_side_by_side() -> None:
    slots = FairSlots(2)
    builds = Builds(slots)
    for name in ("a1", "a2", "a3"):
        builds.start(name, A)
    assert builds.granted == ["a1", "a2"]
    builds.start("b1", B)
    builds.finish("a1")
    assert builds.granted[-1] == "b1" and slots.running() == {"team-a": 1, "team-b": 1}
    for name in ("a2", "b1", "a3"):
        builds.finish(name)


def test_shares_weigh_the_turns_and_an_idle_team_banks_none() -> None:
    heavy = Lane("team-heavy", share=2)
    builds = Builds(FairSlots(1))
    builds.start("first", B)
    for n in range(4):
        builds.start(f"h{n}", heavy)
    for n in range(3):
        builds.start(f"b{n}", B)
    for name in ("first", "h0", "h1", "h2", "b0", "h3", "b1"):
        builds.finish(name)
    # Heavy joined at the current pass, not behind B's turns before it, and then took two
    # turns to B's one (first, b0: h0 to h3), the one that waited longer first on a tie.
    assert builds.granted == ["first", "h0", "h1", "h2", "b0", "h3", "b1", "b2"]
    builds.finish("b2")


def test_a_cancelled_wait_takes_no_slot() -> None:
    slots = FairSlots(1)
    assert slots.try_acquire(A)
    cancel = threading.Event()
    answer: list[bool] = []
    waiting = threading.Thread(target=lambda: answer.append(slots.acquire(B, cancel)))
    waiting.start()
    _until(lambda: bool(slots._waiting))
    cancel.set()
    waiting.join(5)
    assert answer == [False] and slots._waiting == []
    assert not slots.try_acquire(B)  # a1 still holds the one slot
    slots.release(A)
    assert slots.try_acquire(B) and slots.running() == {"team-b": 1}


def test_a_team_idle_while_another_built_alone_takes_its_turn_and_no_more() -> None:
    builds = Builds(FairSlots(1))
    for n in range(6):
        builds.start(f"a{n}", A)
    for n in range(4):
        builds.finish(f"a{n}")
    for n in range(3):
        builds.start(f"b{n}", B)
    for name in ("a4", "b0", "a5", "b1"):
        builds.finish(name)
    # B was idle during a0 to a3: it gets the next turn, not four in a row.
    assert builds.granted == ["a0", "a1", "a2", "a3", "a4", "b0", "a5", "b1", "b2"]
    builds.finish("b2")
