"""A cap on request bodies, before any route reads one.

A declared Content-Length over the cap is refused at once; a chunked body is counted as it
arrives and refused as soon as it passes the cap, so no route ever buffers more than that.
"""

from __future__ import annotations

import json

from starlette.types import ASGIApp, Message, Receive, Scope, Send


class BodyLimit:
    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    def _message(self) -> bytes:
        return json.dumps(
            {
                "detail": f"The request body is larger than this box accepts "
                f"({self.max_bytes} bytes, EXAMHALL_MAX_BODY_BYTES). Send a smaller suite "
                "or docs bundle."
            }
        ).encode()

    async def _refuse(self, send: Send) -> None:
        body = self._message()
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"connection", b"close"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for name, value in scope.get("headers", []):
            if name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    declared = -1
                if declared > self.max_bytes:
                    await self._refuse(send)
                    return
        seen = 0
        refused = False

        async def counting_receive() -> Message:
            nonlocal seen, refused
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes and not refused:
                    refused = True
                    await self._refuse(send)
                    # The route stops reading; whatever it answers is dropped below.
                    return {"type": "http.disconnect"}
            return message

        async def guarded_send(message: Message) -> None:
            if not refused:
                await send(message)

        await self.app(scope, counting_receive, guarded_send)
