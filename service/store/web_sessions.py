"""The web UI's session rows (service/api/sessions.py says what a session is)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import delete
from sqlalchemy.orm import Session

from service.store.models import WebSession


def add_session(
    db: Session, sha256: str, token_sha256: str, created_at: datetime, expires_at: datetime
) -> None:
    # Expired rows of anyone go with each new one, so the table stays small.
    db.execute(delete(WebSession).where(WebSession.expires_at < created_at))
    db.add(
        WebSession(
            sha256=sha256, token_sha256=token_sha256, created_at=created_at, expires_at=expires_at
        )
    )


def find_session(db: Session, sha256: str) -> WebSession | None:
    return db.get(WebSession, sha256)


def delete_session(db: Session, sha256: str) -> None:
    db.execute(delete(WebSession).where(WebSession.sha256 == sha256))
