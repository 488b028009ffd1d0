"""Writing a trial's events as they arrive."""

from __future__ import annotations

from typing import Any

from sqlalchemy import insert
from sqlalchemy.orm import Session, sessionmaker

from service.store.models import Event


def insert_events(sessions: sessionmaker[Session], rows: list[dict[str, Any]]) -> None:
    """One bulk INSERT of event rows (trial_id, seq, type, payload) in a transaction of its
    own: plain dicts, without the ORM's unit of work, which cost more than the rows."""
    with sessions.begin() as session:
        session.execute(insert(Event), rows)
