"""Who is reviewing: the caller's team and which of its tokens, by the bearer token or by
the web session's token (a session stands for the token it was opened with)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from fastapi import Request
from sqlalchemy.orm import Session

from service.api.auth import bearer_token
from service.api.sessions import SESSION_COOKIE, session_hash
from service.store.reviews import token_prefix
from service.store.web_sessions import find_session
from service.teams import Principal, hash_token


@dataclass(frozen=True)
class Reviewer:
    team: str
    token_prefix: str | None
    via: Literal["api", "web"]


def reviewer_of(
    session: Session, request: Request, caller: Principal, via: Literal["api", "web"]
) -> Reviewer:
    token = bearer_token(request)
    token_sha256: str | None = None
    if token is not None:
        token_sha256 = hash_token(token)
    elif (session_id := request.cookies.get(SESSION_COOKIE)) is not None:
        row = find_session(session, session_hash(session_id))
        token_sha256 = row.token_sha256 if row is not None else None
    prefix = token_prefix(session, token_sha256) if token_sha256 is not None else None
    return Reviewer(team=caller.name, token_prefix=prefix, via=via)
