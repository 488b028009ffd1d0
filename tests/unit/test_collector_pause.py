"""The cycle collector's pause around a large report: nested and overlapping pauses, and a
collector someone else disabled left as it was."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator

import pytest

from service.collector_pause import collector_paused


@pytest.fixture(autouse=True)
def collector_restored() -> Iterator[None]:
    was = gc.isenabled()
    yield
    (gc.enable if was else gc.disable)()


def test_a_pause_disables_the_collector_until_the_last_one_ends() -> None:
    gc.enable()
    with collector_paused():
        assert not gc.isenabled()
        with collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the outer pause still holds
    assert gc.isenabled()


def test_a_pause_that_raises_still_ends() -> None:
    gc.enable()
    with pytest.raises(RuntimeError), collector_paused():
        raise RuntimeError("the report failed")
    assert gc.isenabled()


def test_a_collector_disabled_before_stays_disabled() -> None:
    gc.disable()
    with collector_paused():
        assert not gc.isenabled()
    assert not gc.isenabled()


def test_overlapping_pauses_in_threads_enable_it_once_both_end() -> None:
    gc.enable()
    first_in, second_done = threading.Event(), threading.Event()
    seen: list[bool] = []

    def first() -> None:
        with collector_paused():
            first_in.set()
            second_done.wait(10)
            seen.append(gc.isenabled())  # the other thread's pause ended, this one holds

    thread = threading.Thread(target=first)
    thread.start()
    assert first_in.wait(10)
    with collector_paused():
        pass
    second_done.set()
    thread.join(10)
    assert seen == [False]
    assert gc.isenabled()
