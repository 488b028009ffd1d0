"""JSON bodies FastAPI cannot parse answer 422 with the reason, as every other bad input does.

FastAPI turns a JSON syntax error into a 422 itself, but a body that is not UTF-8, or holds
an integer longer than Python converts (4300 digits), fails inside its parser and becomes a
bare 400 "There was an error parsing the body", raised from the parser's exception. The
app's HTTPException handler (service/api/allow.py) asks `unparsable_body` about each 400.

A body nested thousands deep would make json.loads raise RecursionError (that same bare 400),
and one nested just less deep parses into a value that later recursion trips over, so
JsonDepthLimit refuses a JSON body nested beyond service/nesting.py's MAX_DEPTH before any
route parses it.
"""

from __future__ import annotations

import json
from email.message import Message as MediaType

from fastapi import Request
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from service.nesting import json_depth_exceeds, too_deep


def body_problem(body: bytes) -> str:
    """What is wrong with a body FastAPI could not parse as JSON."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        return f"The body is not valid UTF-8 (byte {exc.start}); send UTF-8 JSON."
    try:
        json.loads(text)
    except ValueError as exc:
        if "int_max_str_digits" in str(exc):
            # Python's own hint (sys.set_int_max_str_digits) is the server's to act on, not
            # the caller's.
            return (
                "The body holds an integer of more than 4300 digits, which no field of this "
                "API takes; send a smaller number."
            )
        return f"The body is not valid JSON: {exc}."
    return "The body could not be parsed as JSON."


async def unparsable_body(request: Request, exc: HTTPException) -> JSONResponse | None:
    """A 422 naming the body's fault for FastAPI's parse-failure 400; None for any other."""
    if exc.status_code != 400 or not isinstance(exc.__cause__, ValueError):
        return None  # UnicodeDecodeError and the integer limit are both ValueErrors
    problem = body_problem(await request.body())
    detail = [{"loc": ["body"], "msg": problem, "type": "json_invalid"}]
    return JSONResponse(status_code=422, content={"detail": detail})


def parsed_as_json(scope: Scope) -> bool:
    """Whether FastAPI would parse this request's body as JSON: an application/json or
    application/*+json body; one without a Content-Type too, as FastAPI does when a route is
    not strict about it."""
    content_type = next((v for k, v in scope.get("headers", []) if k == b"content-type"), None)
    if content_type is None:
        return True
    media = MediaType()
    media["content-type"] = content_type.decode("latin-1")
    subtype = media.get_content_subtype()
    return media.get_content_maintype() == "application" and (
        subtype == "json" or subtype.endswith("+json")
    )


class JsonDepthLimit:
    """Refuses, with 422, a JSON body nested more than MAX_DEPTH deep, before a route reads
    it. It sits inside BodyLimit (service/app.py), so what it buffers is already capped."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not parsed_as_json(scope):
            await self.app(scope, receive, send)
            return
        messages: list[Message] = []
        body = bytearray()
        complete = False
        while not complete:
            message = await receive()
            messages.append(message)
            if message["type"] != "http.request":
                break  # the client left, or BodyLimit refused the body: the route hears it
            body += message.get("body", b"")
            complete = not message.get("more_body", False)
        # A body of many brackets takes a moment to scan: off the event loop.
        if complete and await run_in_threadpool(json_depth_exceeds, bytes(body)):
            problem = f"{too_deep('The body')}."
            detail = [{"loc": ["body"], "msg": problem, "type": "json_invalid"}]
            await JSONResponse(status_code=422, content={"detail": detail})(scope, receive, send)
            return

        async def replay() -> Message:
            return messages.pop(0) if messages else await receive()

        await self.app(scope, replay, send)
