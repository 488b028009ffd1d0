"""Teams and API tokens in the store."""

from __future__ import annotations

from sqlalchemy.orm import Session

from service.store.models import Team


def team_by_id(session: Session, team_id: str) -> Team | None:
    return session.get(Team, team_id)
