"""Waiting out the store's faults (its server restarting, its disk full) in the scheduler:
each is named on /healthz while it lasts (service/faults.py), and a trial's result that
cannot be written yet is written again until it is, rather than lost with its thread."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TypeVar

from service.faults import Faults
from service.store.failures import STORE_FAULTS, StoreFault, StoreFaultKind, store_fault

log = logging.getLogger("examhall.scheduler")

T = TypeVar("T")

# Between attempts at a write the store refused: doubling from the first, up to the last.
FIRST_WAIT_S = 0.5
LONGEST_WAIT_S = 5.0


class Outages:
    """The store's faults as the scheduler meets them, reported to `faults`."""

    def __init__(self, faults: Faults, stop: threading.Event) -> None:
        self.faults = faults
        self.stop = stop

    def seen(self, exc: BaseException) -> StoreFault | None:
        """Report the store's fault that `exc` shows, if it shows one."""
        fault = store_fault(exc)
        if fault is not None:
            for kind in STORE_FAULTS:
                if kind != fault.kind:
                    self.faults.clear(kind)
            if self.faults.report(fault.kind, fault.message):
                log.warning("%s (%s)", fault.message, fault.reason)
        return fault

    def current(self) -> bool:
        """Whether the store has a fault now, as last seen."""
        return any(kind in self.faults.current() for kind in STORE_FAULTS)

    def passed(self, kinds: tuple[StoreFaultKind, ...] = STORE_FAULTS) -> None:
        """The store's faults of these kinds are over: by default all of them, as a write
        that went through shows (a read shows only that the store is reachable)."""
        for kind in kinds:
            if self.faults.clear(kind):
                log.warning("The store works again (%s is over).", kind)

    def until_written(self, write: Callable[[], T]) -> T:
        """`write`'s result once the store takes it, waiting out the store's faults (but
        not past the scheduler's stop). Any other error is raised at once."""
        wait_s = FIRST_WAIT_S
        while True:
            try:
                result = write()
            except Exception as exc:
                if self.seen(exc) is None or self.stop.is_set():
                    raise
                self.stop.wait(wait_s)
                wait_s = min(wait_s * 2, LONGEST_WAIT_S)
                continue
            self.passed()
            return result
