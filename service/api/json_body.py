"""JSON bodies FastAPI cannot parse answer 422 with the reason, as every other bad input does.

FastAPI turns a JSON syntax error into a 422 itself, but a body that is not UTF-8, or holds
an integer longer than Python converts (4300 digits), fails inside its parser and becomes a
bare 400 "There was an error parsing the body", raised from the parser's exception. The
app's HTTPException handler (service/api/allow.py) asks `unparsable_body` about each 400.
"""

from __future__ import annotations

import json

from fastapi import Request
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException


def body_problem(body: bytes) -> str:
    """What is wrong with a body FastAPI could not parse as JSON."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        return f"The body is not valid UTF-8 (byte {exc.start}); send UTF-8 JSON."
    try:
        json.loads(text)
    except ValueError as exc:
        return f"The body is not valid JSON: {exc}."
    return "The body could not be parsed as JSON."


async def unparsable_body(request: Request, exc: HTTPException) -> JSONResponse | None:
    """A 422 naming the body's fault for FastAPI's parse-failure 400; None for any other."""
    if exc.status_code != 400 or not isinstance(exc.__cause__, ValueError):
        return None  # UnicodeDecodeError and the integer limit are both ValueErrors
    problem = body_problem(await request.body())
    detail = [{"loc": ["body"], "msg": problem, "type": "json_invalid"}]
    return JSONResponse(status_code=422, content={"detail": detail})
