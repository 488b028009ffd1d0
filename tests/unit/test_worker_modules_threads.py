"""The worker's stdlib modules, found by parsing the sandbox package, asked for by a job's
builds side by side (service/environments/worker_layer.py).

CPython 3.11's ast.parse fails with "AST constructor recursion depth mismatch" when two
threads parse at once, which is how a job's first two environment builds on a new control
plane ended in a fault of ours (and the job was prepared a second time). A thread switch in
the middle of a parse is made likely here: every garbage collection (made frequent) releases
the GIL, and the parse allocates many objects."""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Iterator

import pytest

from service.environments import worker_layer

THREADS = 3
ROUNDS = 5


@pytest.fixture
def switching_in_every_collection() -> Iterator[None]:
    def yield_the_gil(phase: str, info: dict[str, int]) -> None:
        time.sleep(0)

    threshold = gc.get_threshold()
    gc.callbacks.append(yield_the_gil)
    gc.set_threshold(50)
    try:
        yield
    finally:
        gc.set_threshold(*threshold)
        gc.callbacks.remove(yield_the_gil)


def asked_at_once() -> tuple[list[tuple[str, ...]], list[BaseException]]:
    """worker_modules from THREADS threads released together: what each found, and faults."""
    start = threading.Barrier(THREADS)
    found: list[tuple[str, ...]] = []
    faults: list[BaseException] = []

    def ask() -> None:
        start.wait()
        try:
            found.append(worker_layer.worker_modules())
        except Exception as exc:
            faults.append(exc)

    threads = [threading.Thread(target=ask) for _ in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return found, faults


def test_builds_side_by_side_find_the_worker_modules_without_a_fault(
    switching_in_every_collection: None,
) -> None:
    expected = worker_layer.worker_modules()
    assert {"json", "socket", "os"} <= set(expected)
    for _ in range(ROUNDS):
        worker_layer._worker_modules.cache_clear()  # each round parses again, at once
        found, faults = asked_at_once()
        assert faults == []
        assert found == [expected] * THREADS
