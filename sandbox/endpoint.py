"""An OpenAI- and Anthropic-compatible endpoint on 127.0.0.1 in the sandbox, for external agents.

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
from collections.abc import Callable, Mapping
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


def messages_to_model_request(body: dict[str, Any]) -> ModelRequest:
    """An Anthropic Messages request as a ModelRequest."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise BadRequest("messages must be a non-empty list")
    system = body.get("system") or ""
    if isinstance(system, list):
        system = "".join(str(b.get("text", "")) for b in system if isinstance(b, dict))
    out: list[Message] = []
    names: dict[str, str] = {}
    for message in messages:
        role = message.get("role") if isinstance(message, dict) else None
        content = message.get("content") if isinstance(message, dict) else None
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        if role not in ("user", "assistant") or not isinstance(blocks, list):
            raise BadRequest(f"unknown message role {role!r} or content")
        texts = [str(b.get("text", "")) for b in blocks if b.get("type") == "text"]
        if role == "assistant":
            calls = []
            for block in blocks:
                if block.get("type") == "tool_use":
                    names[str(block["id"])] = str(block["name"])
                    calls.append(ToolCall(str(block["id"]), str(block["name"]), block["input"]))
            out.append(
                AssistantMessage("".join(texts), tuple(calls), TOOL_USE if calls else "stop")
            )
            continue
        for block in blocks:
            if block.get("type") == "tool_result":
                call_id = str(block["tool_use_id"])
                result = block.get("content")
                text = result if isinstance(result, str) else _text(result)
                out.append(
                    ToolResultMessage(
                        call_id, names.get(call_id, "tool"), text, bool(block.get("is_error"))
                    )
                )
        if texts:
            out.append(UserMessage("".join(texts)))
    tools = tuple(
        ToolSpec(str(t["name"]), str(t.get("description", "")), dict(t.get("input_schema") or {}))
        for t in body.get("tools") or []
    )
    return ModelRequest(str(system), tuple(out), tools)


STOP_REASONS = {TOOL_USE: "tool_use", "stop": "end_turn", "length": "max_tokens"}


def to_message(turn: AssistantTurn, model: str) -> dict[str, Any]:
    content: list[dict[str, Any]] = [{"type": "text", "text": turn.text}] if turn.text else []
    content += [
        {"type": "tool_use", "id": call.id, "name": call.name, "input": call.arguments}
        for call in turn.tool_calls
    ]
    return {
        "id": f"msg_{secrets.token_hex(8)}",
        "type": "message",
        "role": "assistant",
        "model": turn.model or model,
        "content": content,
        "stop_reason": STOP_REASONS.get(turn.stop_reason, turn.stop_reason),
        "stop_sequence": None,
        "usage": {
            "input_tokens": turn.usage.input_tokens,
            "output_tokens": turn.usage.output_tokens,
        },
    }


def _error(kind: str, message: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "code": None}}


def _anthropic_error(kind: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": kind, "message": message}}


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

    def answer(
        self, path: str, headers: Mapping[str, str], raw: bytes
    ) -> tuple[int, dict[str, Any]]:
        """Chat Completions at /v1/chat/completions, Anthropic Messages at /v1/messages."""
        route = path.rstrip("/")
        anthropic = route == "/v1/messages"
        error = _anthropic_error if anthropic else _error
        # Either scheme on either route: SDK versions differ in which one they send.
        keys = {headers.get("x-api-key"), headers.get("authorization", "").removeprefix("Bearer ")}
        if self.key not in keys:
            return 401, error("authentication_error", "Incorrect API key provided.")
        if route not in ("/v1/chat/completions", "/v1/messages"):
            hint = f"No route {path}; use /v1/chat/completions or /v1/messages."
            return 404, error("not_found_error", hint)
        try:
            body = json.loads(raw)
            body = body if isinstance(body, dict) else {}
            request = (messages_to_model_request if anthropic else to_model_request)(body)
        except (ValueError, AttributeError, KeyError, TypeError) as exc:
            return 400, error("invalid_request_error", str(exc))
        with self._lock:
            self.requests += 1
            try:
                turn = self.complete(request)
            except ProviderError as exc:
                status = 429 if exc.kind == "limit_exceeded" else 502
                return status, error(exc.kind, str(exc))
        return 200, (to_message if anthropic else to_completion)(turn, self.model)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                if length > MAX_BODY:
                    status, body = 413, _error("invalid_request_error", "Request too large.")
                else:
                    headers = {k.lower(): v for k, v in self.headers.items()}
                    status, body = endpoint.answer(self.path, headers, self.rfile.read(length))
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        return Handler
