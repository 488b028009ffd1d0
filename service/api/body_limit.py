"""A cap on request bodies, before any route reads one.

A declared Content-Length over the cap is refused at once; a chunked body is counted as it
arrives and refused as soon as it passes the cap, so no route ever buffers more than that.
A path may have a cap of its own (POST /v1/suites takes an archive, capped by
EXAMHALL_MAX_SUITE_ARCHIVE_BYTES), in place of the general one.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

from starlette.types import ASGIApp, Message, Receive, Scope, Send


@dataclass(frozen=True)
class BodyCap:
    max_bytes: int
    setting: str = "EXAMHALL_MAX_BODY_BYTES"
    advice: str = "Send a smaller suite or docs bundle."


class BodyLimit:
    def __init__(
        self, app: ASGIApp, max_bytes: int, paths: Mapping[str, BodyCap] | None = None
    ) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.paths = dict(paths or {})

    @staticmethod
    def _message(cap: BodyCap) -> bytes:
        return json.dumps(
            {
                "detail": f"The request body is larger than this box accepts "
                f"({cap.max_bytes} bytes, {cap.setting}). {cap.advice}"
            }
        ).encode()

    async def _refuse(self, send: Send, cap: BodyCap) -> None:
        body = self._message(cap)
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
        cap = self.paths.get(scope.get("path", "")) or BodyCap(self.max_bytes)
        for name, value in scope.get("headers", []):
            if name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    declared = -1
                if declared > cap.max_bytes:
                    await self._refuse(send, cap)
                    return
        seen = 0
        refused = False

        async def counting_receive() -> Message:
            nonlocal seen, refused
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > cap.max_bytes and not refused:
                    refused = True
                    await self._refuse(send, cap)
                    # The route stops reading; whatever it answers is dropped below.
                    return {"type": "http.disconnect"}
            return message

        async def guarded_send(message: Message) -> None:
            if not refused:
                await send(message)

        await self.app(scope, counting_receive, guarded_send)
