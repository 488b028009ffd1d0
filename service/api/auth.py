"""Who is calling: a bearer token for the API, a session cookie for the web UI.

The API takes `Authorization: Bearer <token>`. A browser cannot be made to send that header,
so the web UI signs in once and holds a server-side session (service/api/sessions.py) in an
HttpOnly, SameSite=Strict cookie. The API accepts that cookie for reads only (so the UI's
artifact links work): a write with no bearer token is refused, whatever cookie comes with
it, so no page anywhere can make a signed-in browser cancel a job.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Depends, HTTPException, Request

from service.api.context import Context, Ctx
from service.api.schemas import ErrorBody
from service.api.sessions import SESSION_COOKIE, session_principal
from service.teams import Principal, authenticate

UNAUTHORIZED: dict[int | str, dict[str, Any]] = {401: {"model": ErrorBody}}
READS = ("GET", "HEAD", "OPTIONS")


def bearer_token(request: Request) -> str | None:
    header = request.headers.get("authorization", "")
    scheme, _, value = header.partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip()
    return None


def resolve(c: Context, request: Request) -> Principal | None:
    """The caller by bearer token, else by session cookie; None when neither is valid."""
    token = bearer_token(request)
    with c.sessions() as session:
        if token is not None:
            return authenticate(session, token, c.admin_token)
        session_id = request.cookies.get(SESSION_COOKIE)
        if session_id:
            return session_principal(session, session_id, c.admin_token)
    return None


def principal(request: Request, c: Ctx) -> Principal:
    token = bearer_token(request)
    if token is None and request.method not in READS and request.cookies.get(SESSION_COOKIE):
        raise HTTPException(
            403,
            "The web UI's session cookie is accepted for reads only; send the API token as "
            "`Authorization: Bearer <token>` to change anything.",
        )
    if token is None and not request.cookies.get(SESSION_COOKIE):
        raise HTTPException(
            401,
            "No API token. Send `Authorization: Bearer <token>`; an admin creates tokens with "
            "`examhall admin create-token TEAM`.",
            headers={"WWW-Authenticate": "Bearer"},
        )
    found = resolve(c, request)
    if found is None:
        raise HTTPException(
            401,
            "The API token (or web session) is unknown, expired or revoked. Ask your box's "
            "admin for a new token, or sign in again.",
            headers={"WWW-Authenticate": 'Bearer error="invalid_token"'},
        )
    return found


Caller = Annotated[Principal, Depends(principal)]


def require_admin(caller: Caller) -> Principal:
    if not caller.admin:
        # 404, not 403: a team learns nothing about what exists beyond its own jobs.
        raise HTTPException(404, "Not found.")
    return caller


Admin = Annotated[Principal, Depends(require_admin)]
