"""A model provider on loopback for tests: real HTTP, scripted answers, every request kept."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Answer = tuple[int, dict[str, str], dict[str, Any]]


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


@dataclass
class ProviderServer:
    url: str
    received: list[Received] = field(default_factory=list)


@contextmanager
def provider_server(respond: Callable[[Received], Answer]) -> Iterator[ProviderServer]:
    state = ProviderServer(url="")

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("content-length", "0"))
            request = Received(self.path, dict(self.headers), json.loads(self.rfile.read(length)))
            state.received.append(request)
            status, headers, body = respond(request)
            data = json.dumps(body).encode()
            self.send_response(status)
            for name, value in {"content-type": "application/json", **headers}.items():
                self.send_header(name, value)
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()


def openai_answer(
    *,
    text: str | None = None,
    tool: tuple[str, dict[str, Any]] | None = None,
    model: str = "gpt-test-2026-01-01",
    prompt_tokens: int = 100,
    completion_tokens: int = 20,
) -> Answer:
    message: dict[str, Any] = {"role": "assistant", "content": text}
    finish = "stop"
    if tool is not None:
        name, arguments = tool
        message["tool_calls"] = [
            {
                "id": f"call_{name}",
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(arguments)},
            }
        ]
        finish = "tool_calls"
    return (
        200,
        {},
        {
            "id": "chatcmpl-test",
            "object": "chat.completion",
            "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        },
    )


def openai_error(status: int, message: str, headers: dict[str, str] | None = None) -> Answer:
    return status, headers or {}, {"error": {"message": message, "type": "test", "code": None}}
