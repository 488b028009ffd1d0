"""Teams and API tokens in the store (tokens kept only as their sha256)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from service.store.clock import now
from service.store.models import Job, Team, Token
from service.store.queries import dict_of


def team_by_id(session: Session, team_id: str) -> Team | None:
    return session.get(Team, team_id)


def team_by_name(session: Session, name: str) -> Team | None:
    return session.scalar(select(Team).where(Team.name == name))


def add_team(
    session: Session,
    name: str,
    max_containers: int | None,
    egress: Sequence[str] | None = None,
    share: int | None = None,
) -> Team:
    team = Team(
        id=f"team-{uuid.uuid4().hex[:12]}",
        name=name,
        max_containers=max_containers,
        created_at=now(),
        egress=",".join(egress) if egress is not None else None,
        share=share,
    )
    session.add(team)
    session.flush()
    return team


def add_token(session: Session, team_id: str | None, sha256: str, prefix: str) -> None:
    """A token row: of the team, or an admin token when `team_id` is None."""
    session.add(
        Token(
            id=f"token-{uuid.uuid4().hex[:12]}",
            team_id=team_id,
            admin=team_id is None,
            sha256=sha256,
            prefix=prefix,
            created_at=now(),
        )
    )
    session.flush()


def live_token(session: Session, sha256: str) -> Token | None:
    """The unrevoked token with this sha256."""
    return session.scalar(select(Token).where(Token.sha256 == sha256, Token.revoked_at.is_(None)))


def revoke_tokens(session: Session, prefix: str) -> int:
    """Revoke the live tokens whose stored prefix starts with `prefix`; how many there were."""
    rows = session.scalars(
        select(Token).where(Token.prefix.startswith(prefix), Token.revoked_at.is_(None))
    ).all()
    for row in rows:
        row.revoked_at = now()
    return len(rows)


def teams_by_name(session: Session) -> Sequence[Team]:
    return session.scalars(select(Team).order_by(Team.name)).all()


def jobs_per_team(session: Session) -> dict[str | None, int]:
    return dict_of(session, select(Job.team_id, func.count()).group_by(Job.team_id))


def live_tokens_per_team(session: Session) -> dict[str | None, int]:
    return dict_of(
        session,
        select(Token.team_id, func.count())
        .where(Token.revoked_at.is_(None))
        .group_by(Token.team_id),
    )
