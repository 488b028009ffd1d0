"""The faults a control plane is living through now (the store unreachable or its disk full,
the engine unreachable), as the parts that meet them report them, for /healthz to name while
they last (docs/operations/faults.md)."""

from __future__ import annotations

import threading
from typing import Literal

FaultKind = Literal["store_unreachable", "store_disk_full", "engine_unreachable"]


def engine_fault(health: str) -> str:
    """The engine's fault, from what the backend's health check said of it."""
    return (
        f"The Docker engine cannot be reached ({health}). Start it or check the backend's "
        "settings; queued trials wait for it, and the trials it broke off are run again."
    )


class Faults:
    """Each current fault by its kind, with a sentence saying what is wrong and what to do;
    the part that met it clears it when its next attempt succeeds."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._current: dict[FaultKind, str] = {}

    def report(self, kind: FaultKind, message: str) -> bool:
        """Record a fault; True when it is new (so its first sighting is logged once)."""
        with self._lock:
            new = kind not in self._current
            self._current[kind] = message
            return new

    def clear(self, kind: FaultKind) -> bool:
        """The fault is over; True when it was current."""
        with self._lock:
            return self._current.pop(kind, None) is not None

    def current(self) -> dict[FaultKind, str]:
        with self._lock:
            return dict(self._current)
