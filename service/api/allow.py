"""405 answers that list every method of the path (RFC 9110 section 15.5.6).

Starlette answers a wrong method from the first route whose path matches, so a path served by
two routes (GET and DELETE /v1/jobs/{id}) would name only one of them in `Allow`. The
OpenAPI document knows them all.
"""

from __future__ import annotations

import re
from functools import cache

from fastapi import FastAPI, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.responses import Response
from starlette.exceptions import HTTPException

from service.api.json_body import unparsable_body

_METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")


def install(app: FastAPI) -> None:
    @cache
    def patterns() -> tuple[tuple[re.Pattern[str], str], ...]:
        paths = app.openapi()["paths"]
        return tuple(
            (
                re.compile("^" + re.sub(r"\{[^}/]+\}", "[^/]+", path) + "$"),
                ", ".join(m.upper() for m in _METHODS if m in operations),
            )
            for path, operations in paths.items()
        )

    @app.exception_handler(HTTPException)
    async def with_allow(request: Request, exc: HTTPException) -> Response:
        # The one handler of HTTPException, so it also turns FastAPI's 400 for a body it
        # could not parse into the API's 422.
        if (unparsable := await unparsable_body(request, exc)) is not None:
            return unparsable
        if exc.status_code == 405:
            for pattern, methods in patterns():
                if pattern.match(request.url.path):
                    exc.headers = {**(exc.headers or {}), "Allow": methods}
                    break
        return await http_exception_handler(request, exc)
