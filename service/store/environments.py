"""Task environments' builds in the store, by content hash: what was built and what failed,
with the build's log (shown when a job's environment did not build)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from service.domain.status import TrialStatus
from service.store.clock import now
from service.store.models import EnvironmentBuild, Trial

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


def image_uses(session: Session) -> tuple[dict[str, datetime], set[str]]:
    """Each environment image's last use (its latest trial, else its build), and the images
    a queued or running trial names (for the image cache, service/environments/cache.py)."""
    last: dict[str, datetime] = {}
    built = select(EnvironmentBuild.image, EnvironmentBuild.finished_at).where(
        EnvironmentBuild.image.is_not(None), EnvironmentBuild.finished_at.is_not(None)
    )
    used = (
        select(Trial.image, func.max(func.coalesce(Trial.finished_at, Trial.started_at)))
        .where(Trial.image.is_not(None))
        .group_by(Trial.image)
    )
    for image, when in [*session.execute(built), *session.execute(used)]:
        if image is not None and when is not None and (image not in last or when > last[image]):
            last[image] = when
    active = (
        select(Trial.image)
        .distinct()
        .where(
            Trial.image.is_not(None), Trial.status.in_([TrialStatus.QUEUED, TrialStatus.RUNNING])
        )
    )
    return last, {image for image in session.scalars(active) if image is not None}
