"""Task environments' builds in the store, by content hash: what was built and what failed,
with the build's log (shown when a job's environment did not build)."""

from __future__ import annotations

from sqlalchemy.orm import Session

from service.store.clock import now
from service.store.models import EnvironmentBuild

# A log is kept to its end, where a failure is; the start is the context sent and pulled.
MAX_LOG_CHARS = 256 * 1024


def _row(session: Session, content_hash: str, name: str) -> EnvironmentBuild:
    row = session.get(EnvironmentBuild, content_hash)
    if row is None:
        row = EnvironmentBuild(
            content_hash=content_hash, name=name[:300], status="building", log="", started_at=now()
        )
        session.add(row)
    return row


def started(session: Session, content_hash: str, name: str) -> None:
    row = _row(session, content_hash, name)
    if row.status != "built":
        row.status, row.started_at, row.finished_at = "building", now(), None


def built(session: Session, content_hash: str, image: str, digest: str | None, log: str) -> None:
    row = _row(session, content_hash, "")
    row.status, row.image, row.digest, row.finished_at = "built", image, digest, now()
    if log:
        row.log = log[-MAX_LOG_CHARS:]


def failed(session: Session, content_hash: str, log: str) -> None:
    row = _row(session, content_hash, "")
    row.status, row.finished_at, row.log = "failed", now(), log[-MAX_LOG_CHARS:]


def build_log(session: Session, content_hash: str) -> EnvironmentBuild | None:
    return session.get(EnvironmentBuild, content_hash)
