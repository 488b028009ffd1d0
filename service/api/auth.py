"""Bearer-token authentication for the API and the web UI.

The API takes `Authorization: Bearer <token>`; the web UI, which a browser cannot make send
that header, takes the same token from an HttpOnly, SameSite=Strict cookie set at login, so a
page on another site cannot ride on it.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Depends, HTTPException, Request

from service.api.context import Ctx
from service.api.schemas import ErrorBody
from service.teams import Principal, authenticate

COOKIE = "examhall_token"
UNAUTHORIZED: dict[int | str, dict[str, Any]] = {401: {"model": ErrorBody}}


def presented_token(request: Request) -> str | None:
    header = request.headers.get("authorization", "")
    scheme, _, value = header.partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip()
    return request.cookies.get(COOKIE) or None


def principal(request: Request, c: Ctx) -> Principal:
    token = presented_token(request)
    if token is None:
        raise HTTPException(
            401,
            "No API token. Send `Authorization: Bearer <token>`; an admin creates tokens with "
            "`examhall admin create-token TEAM`.",
            headers={"WWW-Authenticate": "Bearer"},
        )
    with c.sessions() as session:
        found = authenticate(session, token, c.admin_token)
    if found is None:
        raise HTTPException(
            401,
            "The API token is unknown or revoked. Ask your box's admin for a new one.",
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
