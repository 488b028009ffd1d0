"""The heartbeat rows: which control planes sharing the store are alive.

Every control plane writes a heartbeat row while it runs. Another plane takes over a plane's
running trials (queues them again, removes their sandboxes) only once that plane is gone:
it stopped beating for `STALE_AFTER_S`, or it ran on this host and its process has exited.
Until then its trials are left alone, so two planes on one database never run a trial twice.
"""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import delete, select, update
from sqlalchemy.orm import Session, sessionmaker

from service.owners import owner_gone
from service.store.clock import now
from service.store.models import Plane

BEAT_EVERY_S = 5.0
# Far above the beat interval, so a plane slowed by a busy database is not taken for dead;
# planes' clocks must agree to well within it.
STALE_AFTER_S = 60.0


def beat(sessions: sessionmaker[Session], owner: str) -> None:
    """Record that `owner` is alive now."""
    at = now()
    with sessions.begin() as session:
        seen = session.connection().execute(
            update(Plane).where(Plane.owner == owner).values(seen_at=at)
        )
        if seen.rowcount == 0:
            session.add(Plane(owner=owner, started_at=at, seen_at=at))


def forget(sessions: sessionmaker[Session], owner: str) -> None:
    """`owner` stopped cleanly; its row goes so the table names only planes that may run."""
    with sessions.begin() as session:
        session.execute(delete(Plane).where(Plane.owner == owner))


def live_planes(session: Session) -> set[str]:
    """Owners of the control planes presumed alive now."""
    since = now() - timedelta(seconds=STALE_AFTER_S)
    seen = session.scalars(select(Plane.owner).where(Plane.seen_at >= since)).all()
    return {owner for owner in seen if not owner_gone(owner)}


def plane_owners(session: Session) -> set[str]:
    """Every control plane with a heartbeat row, live or not."""
    return set(session.scalars(select(Plane.owner)).all())
