"""An OpenAI-compatible endpoint on 127.0.0.1 inside the sandbox, for external agents.

A CLI agent installed in the image talks Chat Completions to this endpoint with a dummy
per-trial key; each request becomes a ModelRequest for the trial's own model (the relay,
direct mode, or faux), so the real key never reaches the agent and every generation is
recorded like the built-in agent's. Only the trial's model is served, whatever model name
the client asks for.
"""

from __future__ import annotations

import json
import secrets
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from sandbox.conversation import (
    TOOL_USE,
    AssistantMessage,
    AssistantTurn,
    Message,
    ModelRequest,
    ProviderError,
    ToolResultMessage,
    ToolSpec,
    UserMessage,
)
from sandbox.protocol import ToolCall

MAX_BODY = 32 * 1024 * 1024
FINISH = {TOOL_USE: "tool_calls", "stop": "stop", "length": "length"}


class BadRequest(ValueError):
    pass


def _text(content: Any) -> str:
    """OpenAI content: a string, or a list of parts of which the text ones count."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    raise BadRequest("message content must be a string or a list of parts")


def to_model_request(body: dict[str, Any]) -> ModelRequest:
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise BadRequest("messages must be a non-empty list")
    system: list[str] = []
    out: list[Message] = []
    names: dict[str, str] = {}
    for message in messages:
        if not isinstance(message, dict):
            raise BadRequest("each message must be an object")
        role = message.get("role")
        if role in ("system", "developer"):
            system.append(_text(message.get("content")))
        elif role == "user":
            out.append(UserMessage(_text(message.get("content"))))
        elif role == "assistant":
            calls = []
            for call in message.get("tool_calls") or []:
                function = call.get("function") or {}
                try:
                    arguments = json.loads(function.get("arguments") or "{}")
                except ValueError:
                    raise BadRequest("tool call arguments must be JSON") from None
                names[str(call.get("id"))] = str(function.get("name"))
                calls.append(ToolCall(str(call.get("id")), str(function.get("name")), arguments))
            stop = TOOL_USE if calls else "stop"
            out.append(AssistantMessage(_text(message.get("content")), tuple(calls), stop))
        elif role == "tool":
            call_id = str(message.get("tool_call_id"))
            out.append(
                ToolResultMessage(
                    call_id, names.get(call_id, "tool"), _text(message.get("content"))
                )
            )
        else:
            raise BadRequest(f"unknown message role {role!r}")
    tools = []
    for tool in body.get("tools") or []:
        function = tool.get("function") or {} if isinstance(tool, dict) else {}
        if not function.get("name"):
            raise BadRequest("each tool needs function.name")
        tools.append(
            ToolSpec(
                str(function["name"]),
                str(function.get("description", "")),
                dict(function.get("parameters") or {"type": "object"}),
            )
        )
    return ModelRequest("\n\n".join(system), tuple(out), tuple(tools))


def to_completion(turn: AssistantTurn, model: str) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": turn.text or None}
    if turn.tool_calls:
        message["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": json.dumps(call.arguments)},
            }
            for call in turn.tool_calls
        ]
    return {
        "id": f"chatcmpl-{secrets.token_hex(8)}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": turn.model or model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": FINISH.get(turn.stop_reason, turn.stop_reason),
            }
        ],
        "usage": {
            "prompt_tokens": turn.usage.input_tokens,
            "completion_tokens": turn.usage.output_tokens,
            "total_tokens": turn.usage.input_tokens + turn.usage.output_tokens,
        },
    }


def _error(kind: str, message: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "code": None}}


class Endpoint:
    """Serves Chat Completions for one trial; `complete` is the trial's model."""

    def __init__(self, complete: Callable[[ModelRequest], AssistantTurn], model: str) -> None:
        self.complete = complete
        self.model = model
        self.key = f"exh-trial-{secrets.token_hex(16)}"  # worthless outside this trial
        self.requests = 0
        # One model call at a time: the trial's budget and transcript stay in order.
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def start(self) -> Endpoint:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def answer(self, path: str, authorization: str, raw: bytes) -> tuple[int, dict[str, Any]]:
        if authorization != f"Bearer {self.key}":
            return 401, _error("invalid_request_error", "Incorrect API key provided.")
        if path.rstrip("/") != "/v1/chat/completions":
            return 404, _error(
                "invalid_request_error", f"No route {path}; use /v1/chat/completions."
            )
        try:
            body = json.loads(raw)
            request = to_model_request(body if isinstance(body, dict) else {})
        except (ValueError, AttributeError) as exc:
            return 400, _error("invalid_request_error", str(exc))
        with self._lock:
            self.requests += 1
            try:
                turn = self.complete(request)
            except ProviderError as exc:
                status = 429 if exc.kind == "limit_exceeded" else 502
                return status, _error(exc.kind, str(exc))
        return 200, to_completion(turn, self.model)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                if length > MAX_BODY:
                    status, body = 413, _error("invalid_request_error", "Request too large.")
                else:
                    status, body = endpoint.answer(
                        self.path, self.headers.get("authorization", ""), self.rfile.read(length)
                    )
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        return Handler
