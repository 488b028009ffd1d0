"""The web UI's server-side sessions.

Signing in with an API token opens a session: a random id goes into the browser's cookie,
its sha256 into the store with an expiry. The cookie is useless once the session expires,
is signed out (the row is deleted), or its token is revoked; and it is never the API token,
so a stolen cookie cannot be replayed as a bearer token, nor outlive a sign-out.
"""

from __future__ import annotations

import hashlib
import secrets
from datetime import timedelta

from sqlalchemy.orm import Session

from service.store.clock import now
from service.store.web_sessions import add_session, delete_session, find_session
from service.teams import Principal, hash_token, principal_of

SESSION_COOKIE = "examhall_session"
SESSION_PREFIX = "exs_"


def session_hash(session_id: str) -> str:
    return hashlib.sha256(session_id.encode()).hexdigest()


def open_session(db: Session, token: str, ttl_s: int) -> str:
    """A new session for a token already checked valid; returns the id for the cookie."""
    at = now()
    session_id = SESSION_PREFIX + secrets.token_urlsafe(32)
    add_session(db, session_hash(session_id), hash_token(token), at, at + timedelta(seconds=ttl_s))
    return session_id


def session_principal(db: Session, session_id: str, admin_token: str | None) -> Principal | None:
    """Who a session cookie stands for, or None if it is unknown, expired or its token is
    revoked."""
    row = find_session(db, session_hash(session_id))
    if row is None or row.expires_at <= now():
        return None
    return principal_of(db, row.token_sha256, admin_token)


def close_session(db: Session, session_id: str) -> None:
    delete_session(db, session_hash(session_id))
