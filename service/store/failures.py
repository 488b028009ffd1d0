"""Which store errors are the store's own fault (its disk is full, its server cannot be
reached), to be waited out and named on /healthz, rather than a bug to report."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from sqlalchemy.exc import DBAPIError

from service.settings import DATABASE_URL_ENV

# SQLite's primary result code for a full disk (an extended code keeps it in its low byte).
_SQLITE_FULL = 13
# PostgreSQL's SQLSTATE for a full disk (class 53, insufficient resources).
_POSTGRES_DISK_FULL = "53100"

StoreFaultKind = Literal["store_disk_full", "store_unreachable"]
STORE_FAULTS: tuple[StoreFaultKind, ...] = ("store_disk_full", "store_unreachable")


@dataclass(frozen=True)
class StoreFault:
    kind: StoreFaultKind
    # What is wrong and what to do, for anyone (/healthz has no token): no host, path or
    # other detail of the store, which `reason` (the driver's words, for the log) may hold.
    message: str
    reason: str


def _reason(error: BaseException) -> str:
    lines = str(error).strip().splitlines()
    return lines[0] if lines else type(error).__name__


def _from_psycopg(error: BaseException, *names: str) -> bool:
    return any(
        kind.__module__.startswith("psycopg") and kind.__name__ in names
        for kind in type(error).__mro__
    )


def store_fault(exc: BaseException) -> StoreFault | None:
    """The store's fault that `exc` shows, or None when it shows none (a bug, a conflict, a
    busy SQLite file: the caller's own business). `exc` is SQLAlchemy's error or the
    driver's own: the event sink writes on the driver's connection (service/store/events.py),
    and a pool's failure to connect is raised as the driver raised it."""
    error = exc.orig if isinstance(exc, DBAPIError) and exc.orig is not None else exc
    invalidated = isinstance(exc, DBAPIError) and exc.connection_invalidated
    reason = _reason(error)
    code = getattr(error, "sqlite_errorcode", None)
    if isinstance(code, int) and code & 0xFF == _SQLITE_FULL:
        return _disk_full(reason)
    if getattr(error, "sqlstate", None) == _POSTGRES_DISK_FULL:
        return _disk_full(reason)
    # psycopg reports a refused or dropped connection, and a server shutting down or starting
    # up, as an OperationalError; SQLAlchemy marks a connection it found dead as invalidated.
    if invalidated or _from_psycopg(error, "OperationalError", "InterfaceError"):
        return StoreFault(
            "store_unreachable",
            f"The store cannot be reached. Check that the database server named by "
            f"{DATABASE_URL_ENV} is up and reachable; the control plane reconnects by itself "
            "and keeps its running trials' results until it can write them.",
            reason,
        )
    return None


def _disk_full(reason: str) -> StoreFault:
    return StoreFault(
        "store_disk_full",
        f"The store's disk is full. Free space on the volume that holds the store "
        f"({DATABASE_URL_ENV}) or grow it; the control plane resumes by itself once there "
        "is room, and keeps its running trials' results until it can write them.",
        reason,
    )
