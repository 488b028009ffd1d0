"""The provider wire formats against loopback servers that speak each provider's API.

Each fake server checks requests the way the real API does (key, headers, message order,
tool-call bookkeeping) and answers with the documented response and error bodies, so a
request our code builds wrongly fails here the way it would fail in production. Requests
go over real HTTP with urllib, as the worker's direct mode sends them.
"""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from sandbox.conversation import (
    STOP,
    TOOL_USE,
    AssistantMessage,
    ModelRequest,
    ProviderError,
    ToolResultMessage,
    ToolSpec,
    UserMessage,
)
from sandbox.protocol import ToolCall, Usage
from sandbox.providers import (
    WIRE_FORMATS,
    HttpRequest,
    HttpResponse,
    Price,
    ProviderHttpError,
    anthropic,
    classify,
    cost_usd,
    openai,
    retry_after,
)

OPENAI_KEY = "sk-test-openai-0123456789"
ANTHROPIC_KEY = "sk-ant-test-0123456789"

READ_FILE = ToolSpec(
    name="read_file",
    description="Read a file in the workspace.",
    parameters={
        "type": "object",
        "properties": {"path": {"type": "string"}},
        "required": ["path"],
    },
)
BASH = ToolSpec(
    name="bash",
    description="Run a shell command.",
    parameters={"type": "object", "properties": {"command": {"type": "string"}}},
)
SYSTEM = "You are a careful agent."
QUESTION = UserMessage("What is in notes.txt?")


# ----- the loopback servers ----------------------------------------------------------


@dataclass(frozen=True)
class Received:
    method: str
    path: str
    headers: dict[str, str]
    body: Any


@dataclass(frozen=True)
class Reply:
    status: int
    body: Any
    headers: dict[str, str] = field(default_factory=dict)


Validator = Callable[[Received], Reply | None]


class FakeProvider:
    """A loopback HTTP server: checks each request like the real API, then answers the
    next scripted reply."""

    def __init__(self, path: str, validate: Validator) -> None:
        self.path = path
        self.validate = validate
        self.received: list[Received] = []
        self.replies: list[Reply] = []
        provider = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                raw = self.rfile.read(length)
                try:
                    body: Any = json.loads(raw)
                except ValueError:
                    body = raw
                received = Received(
                    "POST", self.path, {k.lower(): v for k, v in self.headers.items()}, body
                )
                provider.received.append(received)
                self._answer(provider.answer(received))

            def _answer(self, reply: Reply) -> None:
                data = reply.body if isinstance(reply.body, bytes) else json.dumps(reply.body)
                payload = data.encode() if isinstance(data, str) else data
                self.send_response(reply.status)
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, format: str, *args: Any) -> None:
                pass  # keep pytest's output to the failures

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        # A short poll keeps shutdown (once per test) from costing half a second.
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def base_url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def answer(self, received: Received) -> Reply:
        if received.path != self.path:
            return Reply(404, {"error": {"message": f"Unknown path {received.path}"}})
        problem = self.validate(received)
        if problem is not None:
            return problem
        if not self.replies:
            return Reply(500, {"error": {"message": "the test scripted no more replies"}})
        return self.replies.pop(0)

    def last_body(self) -> dict[str, Any]:
        body = self.received[-1].body
        assert isinstance(body, dict)
        return body


@pytest.fixture
def serve() -> Iterator[Callable[[str, Validator], FakeProvider]]:
    started: list[FakeProvider] = []

    def start(path: str, validate: Validator) -> FakeProvider:
        fake = FakeProvider(path, validate)
        fake.thread.start()
        started.append(fake)
        return fake

    yield start
    for fake in started:
        fake.server.shutdown()
        fake.server.server_close()
        fake.thread.join(timeout=5)


def send(request: HttpRequest) -> HttpResponse:
    """The direct mode's sender in miniature: urllib, an HTTP error is still an answer."""
    # No proxy: the environment's proxy settings must not catch loopback traffic.
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    outgoing = urllib.request.Request(
        request.url, data=request.body, headers=request.headers, method=request.method
    )
    try:
        with opener.open(outgoing, timeout=10) as answer:
            return HttpResponse(answer.status, dict(answer.headers.items()), answer.read())
    except urllib.error.HTTPError as exc:
        with exc:
            return HttpResponse(exc.code, dict(exc.headers.items()), exc.read())


# ----- OpenAI Chat Completions, as documented ----------------------------------------


def openai_error(status: int, message: str, kind: str, code: str | None = None) -> Reply:
    return Reply(status, {"error": {"message": message, "type": kind, "param": None, "code": code}})


def openai_validate(received: Received) -> Reply | None:
    auth = received.headers.get("authorization", "")
    if auth != f"Bearer {OPENAI_KEY}":
        shown = auth.removeprefix("Bearer ")[:7]
        return openai_error(
            401,
            f"Incorrect API key provided: {shown}***. You can find your API key at "
            "https://platform.openai.com/account/api-keys.",
            "invalid_request_error",
            "invalid_api_key",
        )
    body = received.body
    if not isinstance(body, dict) or not isinstance(body.get("model"), str):
        return openai_error(400, "you must provide a model parameter", "invalid_request_error")
    if "tools" in body:
        tools = body["tools"]
        if not tools:
            return openai_error(400, "[] is too short - 'tools'", "invalid_request_error")
        for tool in tools:
            if tool.get("type") != "function" or "name" not in tool.get("function", {}):
                return openai_error(
                    400, "Missing required parameter: 'tools[0].function'.", "invalid_request"
                )
    pending: set[str] = set()
    for message in body.get("messages", []):
        role = message.get("role")
        if role == "tool":
            if message.get("tool_call_id") not in pending:
                return openai_error(
                    400,
                    "Invalid parameter: messages with role 'tool' must be a response to a "
                    "preceeding message with 'tool_calls'.",
                    "invalid_request_error",
                )
            pending.discard(message["tool_call_id"])
            continue
        if pending:
            return openai_error(
                400,
                "An assistant message with 'tool_calls' must be followed by tool messages "
                "responding to each 'tool_call_id'. The following tool_call_ids did not have "
                f"response messages: {', '.join(sorted(pending))}",
                "invalid_request_error",
            )
        if role == "assistant":
            for call in message.get("tool_calls") or []:
                if not isinstance(call["function"]["arguments"], str):
                    return openai_error(
                        400, "Invalid type for 'arguments': expected a string", "invalid_request"
                    )
                pending.add(call["id"])
        elif role not in ("system", "user"):
            return openai_error(400, f"Invalid value: '{role}'.", "invalid_request_error")
    return None


def completion(
    content: str | None = None,
    *,
    tool_calls: list[dict[str, Any]] | None = None,
    finish_reason: str | None = "stop",
    usage: dict[str, Any] | None = None,
    model: str = "gpt-4o-2024-08-06",
) -> Reply:
    message: dict[str, Any] = {"role": "assistant", "content": content, "refusal": None}
    if tool_calls is not None:
        message["tool_calls"] = tool_calls
    return Reply(
        200,
        {
            "id": "chatcmpl-123",
            "object": "chat.completion",
            "created": 1_700_000_000,
            "model": model,
            "choices": [
                {"index": 0, "message": message, "logprobs": None, "finish_reason": finish_reason}
            ],
            "usage": usage or {"prompt_tokens": 20, "completion_tokens": 5, "total_tokens": 25},
        },
    )


def function_call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


@pytest.fixture
def openai_server(serve: Callable[[str, Validator], FakeProvider]) -> FakeProvider:
    return serve("/v1/chat/completions", openai_validate)


def openai_turn(server: FakeProvider, request: ModelRequest, key: str = OPENAI_KEY) -> Any:
    outgoing = openai.build_request(server.base_url, "gpt-4o", request, api_key=key)
    return openai.parse_response(send(outgoing))


def test_openai_text_answer(openai_server: FakeProvider) -> None:
    openai_server.replies.append(
        completion(
            "It says hello.",
            usage={
                "prompt_tokens": 1200,
                "completion_tokens": 7,
                "total_tokens": 1207,
                "prompt_tokens_details": {"cached_tokens": 1024, "audio_tokens": 0},
            },
        )
    )
    outgoing = openai.build_request(
        openai_server.base_url + "/",  # a trailing slash in the configured URL is harmless
        "gpt-4o",
        ModelRequest(system=SYSTEM, messages=(QUESTION,)),
        api_key=OPENAI_KEY,
        headers={"OpenAI-Organization": "org-1"},
        max_tokens=256,
    )
    turn = openai.parse_response(send(outgoing))

    assert turn.text == "It says hello."
    assert turn.tool_calls == ()
    assert turn.stop_reason == STOP
    assert turn.model == "gpt-4o-2024-08-06"
    assert turn.usage == Usage(
        input_tokens=1200, output_tokens=7, requests=1, cache_read_tokens=1024
    )
    received = openai_server.received[0]
    assert received.headers["openai-organization"] == "org-1"
    assert received.headers["content-type"] == "application/json"
    assert received.body == {
        "model": "gpt-4o",
        "messages": [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": QUESTION.content},
        ],
        "max_tokens": 256,
    }


def test_openai_without_key_or_system_sends_neither(openai_server: FakeProvider) -> None:
    # Local servers take no key: no Authorization header at all (here, the server's 401).
    request = ModelRequest(system="", messages=(QUESTION,))
    with pytest.raises(ProviderHttpError):
        openai_turn(openai_server, request, key="")
    received = openai_server.received[0]
    assert "authorization" not in received.headers
    assert [m["role"] for m in received.body["messages"]] == ["user"]
    assert "tools" not in received.body


def test_openai_tool_call_round_trip(openai_server: FakeProvider) -> None:
    openai_server.replies += [
        completion(
            None,
            tool_calls=[
                function_call("call_a1", "read_file", '{"path": "notes.txt"}'),
                function_call("call_b2", "bash", '{"command": "ls -la"}'),
            ],
            finish_reason="tool_calls",
        ),
        completion("notes.txt says hello."),
    ]
    first = ModelRequest(system=SYSTEM, messages=(QUESTION,), tools=(READ_FILE, BASH))
    turn = openai_turn(openai_server, first)

    assert turn.text == ""
    assert turn.stop_reason == TOOL_USE
    assert turn.tool_calls == (
        ToolCall("call_a1", "read_file", {"path": "notes.txt"}),
        ToolCall("call_b2", "bash", {"command": "ls -la"}),
    )
    assert openai_server.last_body()["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "read_file",
                "description": READ_FILE.description,
                "parameters": READ_FILE.parameters,
            },
        },
        {
            "type": "function",
            "function": {
                "name": "bash",
                "description": BASH.description,
                "parameters": BASH.parameters,
            },
        },
    ]

    second = ModelRequest(
        system=SYSTEM,
        messages=(
            QUESTION,
            AssistantMessage(turn.text, turn.tool_calls, turn.stop_reason),
            ToolResultMessage("call_a1", "read_file", "hello"),
            ToolResultMessage("call_b2", "bash", "exit 1", is_error=True),
        ),
        tools=(READ_FILE, BASH),
    )
    final = openai_turn(openai_server, second)

    assert (final.text, final.stop_reason) == ("notes.txt says hello.", STOP)
    messages = openai_server.last_body()["messages"]
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool", "tool"]
    assistant = messages[2]
    assert assistant["content"] is None
    assert [c["id"] for c in assistant["tool_calls"]] == ["call_a1", "call_b2"]
    assert all(c["type"] == "function" for c in assistant["tool_calls"])
    # Arguments travel as a JSON string, which decodes back to what the model sent.
    arguments = [json.loads(c["function"]["arguments"]) for c in assistant["tool_calls"]]
    assert arguments == [{"path": "notes.txt"}, {"command": "ls -la"}]
    assert messages[3] == {"role": "tool", "tool_call_id": "call_a1", "content": "hello"}
    assert messages[4] == {"role": "tool", "tool_call_id": "call_b2", "content": "exit 1"}


def test_openai_400_from_a_conversation_the_api_rejects(openai_server: FakeProvider) -> None:
    # A tool result no assistant asked for: the server's check, not a scripted error.
    request = ModelRequest(
        system=SYSTEM, messages=(QUESTION, ToolResultMessage("call_zz", "bash", "x"))
    )
    with pytest.raises(ProviderHttpError) as caught:
        openai_turn(openai_server, request)
    error = caught.value
    assert (error.status, error.retryable, error.retry_after_s) == (400, False, None)
    assert error.message.startswith("Invalid parameter: messages with role 'tool'")
    assert str(error) == f"openai HTTP 400: {error.message}"


def test_openai_401_wrong_key(openai_server: FakeProvider) -> None:
    with pytest.raises(ProviderHttpError) as caught:
        openai_turn(openai_server, ModelRequest(SYSTEM, (QUESTION,)), key="sk-wrong-key")
    error = caught.value
    assert (error.status, error.retryable) == (401, False)
    assert str(error).startswith("openai HTTP 401: Incorrect API key provided: sk-wron***.")
    assert isinstance(error, ProviderError)


def test_openai_429_carries_retry_after(openai_server: FakeProvider) -> None:
    openai_server.replies.append(
        Reply(
            429,
            {
                "error": {
                    "message": "Rate limit reached for gpt-4o on tokens per min (TPM).",
                    "type": "tokens",
                    "param": None,
                    "code": "rate_limit_exceeded",
                }
            },
            {"Retry-After": "7"},
        )
    )
    with pytest.raises(ProviderHttpError) as caught:
        openai_turn(openai_server, ModelRequest(SYSTEM, (QUESTION,)))
    error = caught.value
    assert (error.status, error.retryable, error.retry_after_s) == (429, True, 7.0)
    assert error.message == "Rate limit reached for gpt-4o on tokens per min (TPM)."


def test_openai_500_is_retryable(openai_server: FakeProvider) -> None:
    openai_server.replies.append(
        openai_error(500, "The server had an error while processing your request.", "server_error")
    )
    with pytest.raises(ProviderHttpError) as caught:
        openai_turn(openai_server, ModelRequest(SYSTEM, (QUESTION,)))
    error = caught.value
    assert (error.status, error.retryable, error.retry_after_s) == (500, True, None)
    assert str(error) == "openai HTTP 500: The server had an error while processing your request."


def test_openai_error_body_that_is_not_json(openai_server: FakeProvider) -> None:
    openai_server.replies.append(Reply(502, b"<html><body>502 Bad Gateway</body></html>"))
    with pytest.raises(ProviderHttpError) as caught:
        openai_turn(openai_server, ModelRequest(SYSTEM, (QUESTION,)))
    assert (caught.value.status, caught.value.retryable) == (502, True)
    assert caught.value.message == "<html><body>502 Bad Gateway</body></html>"


@pytest.mark.parametrize(
    ("finish_reason", "with_call", "expected"),
    [
        ("stop", False, STOP),
        ("tool_calls", True, TOOL_USE),
        ("function_call", True, TOOL_USE),
        ("length", False, "length"),
        ("content_filter", False, "content_filter"),
        ("eos", False, "eos"),
        (None, False, "missing"),
        # Older Ollama says "stop" even when it calls tools; the calls must not be lost.
        ("stop", True, TOOL_USE),
    ],
)
def test_openai_finish_reasons(
    openai_server: FakeProvider, finish_reason: str | None, with_call: bool, expected: str
) -> None:
    calls = [function_call("call_1", "bash", '{"command": "pwd"}')] if with_call else None
    openai_server.replies.append(completion("ok", tool_calls=calls, finish_reason=finish_reason))
    turn = openai_turn(openai_server, ModelRequest(SYSTEM, (QUESTION,), (BASH,)))
    assert turn.stop_reason == expected
    assert len(turn.tool_calls) == int(with_call)


@pytest.mark.parametrize(
    ("arguments", "why"),
    [
        ('{"path": "notes.txt"', "not valid JSON"),
        ('["notes.txt"]', "not a JSON object"),
    ],
)
def test_openai_invalid_tool_call_json(
    openai_server: FakeProvider, arguments: str, why: str
) -> None:
    openai_server.replies.append(
        completion(
            None,
            tool_calls=[function_call("call_1", "read_file", arguments)],
            finish_reason="tool_calls",
        )
    )
    with pytest.raises(ProviderHttpError) as caught:
        openai_turn(openai_server, ModelRequest(SYSTEM, (QUESTION,), (READ_FILE,)))
    error = caught.value
    assert error.retryable is False
    assert "'read_file'" in error.message and why in error.message
    assert str(error).startswith("openai: the model's arguments for tool 'read_file'")


def test_openai_empty_arguments_mean_no_arguments(openai_server: FakeProvider) -> None:
    openai_server.replies.append(
        completion(None, tool_calls=[function_call("c1", "bash", "")], finish_reason="tool_calls")
    )
    turn = openai_turn(openai_server, ModelRequest(SYSTEM, (QUESTION,), (BASH,)))
    assert turn.tool_calls == (ToolCall("c1", "bash", {}),)


def test_openai_error_inside_a_200(openai_server: FakeProvider) -> None:
    # OpenRouter's shape when the upstream fails after accepting the request.
    openai_server.replies.append(
        Reply(200, {"error": {"code": 502, "message": "Upstream provider unavailable"}})
    )
    with pytest.raises(ProviderHttpError) as caught:
        openai.parse_response(
            send(
                openai.build_request(
                    openai_server.base_url,
                    "x",
                    ModelRequest(SYSTEM, (QUESTION,)),
                    api_key=OPENAI_KEY,
                )
            ),
            provider="openrouter",
        )
    assert caught.value.retryable is True
    assert str(caught.value) == "openrouter: Upstream provider unavailable"


def test_openai_200_that_is_not_json(openai_server: FakeProvider) -> None:
    openai_server.replies.append(Reply(200, b"not json"))
    with pytest.raises(ProviderHttpError, match="not JSON") as caught:
        openai_turn(openai_server, ModelRequest(SYSTEM, (QUESTION,)))
    assert caught.value.retryable is False


# ----- Anthropic Messages, as documented ----------------------------------------------


def anthropic_error(status: int, kind: str, message: str) -> Reply:
    return Reply(
        status,
        {"type": "error", "error": {"type": kind, "message": message}},
        {"request-id": "req_0123"},
    )


def anthropic_validate(received: Received) -> Reply | None:
    key = received.headers.get("x-api-key")
    if key is None:
        return anthropic_error(401, "authentication_error", "x-api-key header is required")
    if key != ANTHROPIC_KEY:
        return anthropic_error(401, "authentication_error", "invalid x-api-key")
    if "anthropic-version" not in received.headers:
        return anthropic_error(
            400, "invalid_request_error", "anthropic-version: header is required"
        )
    body = received.body
    if not isinstance(body, dict):
        return anthropic_error(400, "invalid_request_error", "Request body is not JSON")
    if not isinstance(body.get("max_tokens"), int):
        return anthropic_error(400, "invalid_request_error", "max_tokens: Field required")
    for index, tool in enumerate(body.get("tools", [])):
        if "input_schema" not in tool:
            return anthropic_error(
                400, "invalid_request_error", f"tools.{index}.input_schema: Field required"
            )
    messages = body.get("messages", [])
    if messages and messages[0]["role"] != "user":
        return anthropic_error(
            400, "invalid_request_error", 'messages: first message must use the "user" role'
        )
    previous_uses: set[str] = set()
    for index, message in enumerate(messages):
        role = message["role"]
        if role not in ("user", "assistant"):
            return anthropic_error(
                400,
                "invalid_request_error",
                f'messages: Unexpected role "{role}". The Messages API accepts a top-level '
                '`system` parameter, not "system" as an input message role.',
            )
        if index and messages[index - 1]["role"] == role:
            return anthropic_error(
                400,
                "invalid_request_error",
                'messages: roles must alternate between "user" and "assistant", but found '
                f'multiple "{role}" roles in a row',
            )
        blocks = message["content"]
        if isinstance(blocks, str):
            blocks = [{"type": "text", "text": blocks}]
        if not blocks:
            return anthropic_error(
                400,
                "invalid_request_error",
                f"messages.{index}: all messages must have non-empty content",
            )
        if any(b["type"] == "text" and not b["text"] for b in blocks):
            return anthropic_error(
                400, "invalid_request_error", "messages: text content blocks must be non-empty"
            )
        results = [b["tool_use_id"] for b in blocks if b["type"] == "tool_result"]
        unexpected = [r for r in results if r not in previous_uses]
        if unexpected:
            return anthropic_error(
                400,
                "invalid_request_error",
                f"messages.{index}.content.0: unexpected `tool_use_id` found in `tool_result` "
                f"blocks: {unexpected[0]}. Each `tool_result` block must have a corresponding "
                "`tool_use` block in the previous message.",
            )
        if previous_uses - set(results):
            missing = ", ".join(sorted(previous_uses - set(results)))
            return anthropic_error(
                400,
                "invalid_request_error",
                f"messages.{index - 1}: `tool_use` ids were found without `tool_result` blocks "
                f"immediately after: {missing}. Each `tool_use` block must have a "
                "corresponding `tool_result` block in the next message.",
            )
        if results and blocks[0]["type"] != "tool_result":
            return anthropic_error(
                400,
                "invalid_request_error",
                f"messages.{index}: tool_result blocks must come first in the content",
            )
        previous_uses = {b["id"] for b in blocks if b["type"] == "tool_use"}
    return None


def message_reply(
    content: list[dict[str, Any]],
    *,
    stop_reason: str | None = "end_turn",
    usage: dict[str, Any] | None = None,
    model: str = "claude-sonnet-4-20250514",
) -> Reply:
    return Reply(
        200,
        {
            "id": "msg_013Zva2CMHLNnXjNJJKqJ2EF",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": content,
            "stop_reason": stop_reason,
            "stop_sequence": None,
            "usage": usage or {"input_tokens": 30, "output_tokens": 9},
        },
    )


@pytest.fixture
def anthropic_server(serve: Callable[[str, Validator], FakeProvider]) -> FakeProvider:
    return serve("/v1/messages", anthropic_validate)


def anthropic_turn(
    server: FakeProvider,
    request: ModelRequest,
    key: str | None = ANTHROPIC_KEY,
    max_tokens: int | None = None,
) -> Any:
    outgoing = anthropic.build_request(
        server.base_url, "claude-sonnet-4-0", request, api_key=key, max_tokens=max_tokens
    )
    return anthropic.parse_response(send(outgoing))


def test_anthropic_text_answer(anthropic_server: FakeProvider) -> None:
    anthropic_server.replies.append(
        message_reply(
            [
                {"type": "thinking", "thinking": "Let me look.", "signature": "sig"},
                {"type": "text", "text": "It says "},
                {"type": "text", "text": "hello."},
            ],
            usage={
                "input_tokens": 12,
                "output_tokens": 9,
                "cache_creation_input_tokens": 100,
                "cache_read_input_tokens": 2000,
            },
        )
    )
    turn = anthropic_turn(anthropic_server, ModelRequest(SYSTEM, (QUESTION,)))

    assert turn.text == "It says hello."
    assert (turn.tool_calls, turn.stop_reason) == ((), STOP)
    assert turn.model == "claude-sonnet-4-20250514"
    # input_tokens counts every prompt token; the cache parts are also kept apart.
    assert turn.usage == Usage(
        input_tokens=2112,
        output_tokens=9,
        requests=1,
        cache_read_tokens=2000,
        cache_write_tokens=100,
    )
    received = anthropic_server.received[0]
    assert received.headers["anthropic-version"] == "2023-06-01"
    assert received.headers["content-type"] == "application/json"
    assert "authorization" not in received.headers
    assert received.body == {
        "model": "claude-sonnet-4-0",
        "max_tokens": 4096,
        "system": SYSTEM,
        "messages": [{"role": "user", "content": [{"type": "text", "text": QUESTION.content}]}],
    }


def test_anthropic_max_tokens_and_null_cache_counts(anthropic_server: FakeProvider) -> None:
    anthropic_server.replies.append(
        message_reply(
            [{"type": "text", "text": "ok"}],
            usage={
                "input_tokens": 30,
                "output_tokens": 2,
                "cache_creation_input_tokens": None,
                "cache_read_input_tokens": None,
            },
        )
    )
    turn = anthropic_turn(anthropic_server, ModelRequest("", (QUESTION,)), max_tokens=64)
    assert turn.usage == Usage(input_tokens=30, output_tokens=2, requests=1)
    body = anthropic_server.last_body()
    assert body["max_tokens"] == 64
    assert "system" not in body and "tools" not in body


def test_anthropic_tool_call_round_trip(anthropic_server: FakeProvider) -> None:
    anthropic_server.replies += [
        message_reply(
            [
                {"type": "text", "text": "Let me look."},
                {
                    "type": "tool_use",
                    "id": "toolu_01A",
                    "name": "read_file",
                    "input": {"path": "notes.txt"},
                },
                {"type": "tool_use", "id": "toolu_01B", "name": "bash", "input": {}},
            ],
            stop_reason="tool_use",
        ),
        message_reply([{"type": "text", "text": "notes.txt says hello."}]),
    ]
    first = ModelRequest(SYSTEM, (QUESTION,), (READ_FILE, BASH))
    turn = anthropic_turn(anthropic_server, first)

    assert turn.text == "Let me look."
    assert turn.stop_reason == TOOL_USE
    assert turn.tool_calls == (
        ToolCall("toolu_01A", "read_file", {"path": "notes.txt"}),
        ToolCall("toolu_01B", "bash", {}),
    )
    assert anthropic_server.last_body()["tools"] == [
        {
            "name": "read_file",
            "description": READ_FILE.description,
            "input_schema": READ_FILE.parameters,
        },
        {"name": "bash", "description": BASH.description, "input_schema": BASH.parameters},
    ]

    second = ModelRequest(
        SYSTEM,
        (
            QUESTION,
            AssistantMessage(turn.text, turn.tool_calls, turn.stop_reason),
            ToolResultMessage("toolu_01A", "read_file", "hello"),
            ToolResultMessage("toolu_01B", "bash", "bash: exit 2", is_error=True),
            UserMessage("Be brief."),
        ),
        (READ_FILE, BASH),
    )
    final = anthropic_turn(anthropic_server, second)

    assert (final.text, final.stop_reason) == ("notes.txt says hello.", STOP)
    body = anthropic_server.last_body()
    assert body["system"] == SYSTEM
    messages = body["messages"]
    # Both results and the user's note in one user message: the roles alternate.
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    assert messages[1]["content"] == [
        {"type": "text", "text": "Let me look."},
        {
            "type": "tool_use",
            "id": "toolu_01A",
            "name": "read_file",
            "input": {"path": "notes.txt"},
        },
        {"type": "tool_use", "id": "toolu_01B", "name": "bash", "input": {}},
    ]
    assert messages[2]["content"] == [
        {"type": "tool_result", "tool_use_id": "toolu_01A", "content": "hello", "is_error": False},
        {
            "type": "tool_result",
            "tool_use_id": "toolu_01B",
            "content": "bash: exit 2",
            "is_error": True,
        },
        {"type": "text", "text": "Be brief."},
    ]


def test_anthropic_tool_only_turn_has_no_empty_text(anthropic_server: FakeProvider) -> None:
    # The API rejects empty text blocks, so a turn that only calls tools sends none.
    anthropic_server.replies.append(message_reply([{"type": "text", "text": "done"}]))
    call = ToolCall("toolu_1", "bash", {"command": "pwd"})
    request = ModelRequest(
        SYSTEM,
        (QUESTION, AssistantMessage("", (call,)), ToolResultMessage("toolu_1", "bash", "/")),
        (BASH,),
    )
    assert anthropic_turn(anthropic_server, request).text == "done"
    assistant = anthropic_server.last_body()["messages"][1]
    assert [b["type"] for b in assistant["content"]] == ["tool_use"]


def test_anthropic_400_from_a_conversation_the_api_rejects(anthropic_server: FakeProvider) -> None:
    call = ToolCall("toolu_1", "bash", {"command": "pwd"})
    request = ModelRequest(
        SYSTEM,
        (QUESTION, AssistantMessage("", (call,)), ToolResultMessage("toolu_WRONG", "bash", "/")),
    )
    with pytest.raises(ProviderHttpError) as caught:
        anthropic_turn(anthropic_server, request)
    error = caught.value
    assert (error.status, error.retryable, error.retry_after_s) == (400, False, None)
    assert "unexpected `tool_use_id` found in `tool_result` blocks: toolu_WRONG" in error.message
    assert str(error) == f"anthropic HTTP 400: {error.message}"


def test_anthropic_401_wrong_key(anthropic_server: FakeProvider) -> None:
    with pytest.raises(ProviderHttpError) as caught:
        anthropic_turn(anthropic_server, ModelRequest(SYSTEM, (QUESTION,)), key="sk-ant-wrong")
    assert (caught.value.status, caught.value.retryable) == (401, False)
    assert str(caught.value) == "anthropic HTTP 401: invalid x-api-key"


def test_anthropic_429_carries_retry_after(anthropic_server: FakeProvider) -> None:
    anthropic_server.replies.append(
        Reply(
            429,
            {
                "type": "error",
                "error": {
                    "type": "rate_limit_error",
                    "message": "Number of request tokens has exceeded your per-minute rate limit",
                },
            },
            {"retry-after": "13"},
        )
    )
    with pytest.raises(ProviderHttpError) as caught:
        anthropic_turn(anthropic_server, ModelRequest(SYSTEM, (QUESTION,)))
    error = caught.value
    assert (error.status, error.retryable, error.retry_after_s) == (429, True, 13.0)
    assert error.message == "Number of request tokens has exceeded your per-minute rate limit"


@pytest.mark.parametrize(
    ("status", "kind", "message"),
    [(500, "api_error", "Internal server error"), (529, "overloaded_error", "Overloaded")],
)
def test_anthropic_server_errors_are_retryable(
    anthropic_server: FakeProvider, status: int, kind: str, message: str
) -> None:
    anthropic_server.replies.append(anthropic_error(status, kind, message))
    with pytest.raises(ProviderHttpError) as caught:
        anthropic_turn(anthropic_server, ModelRequest(SYSTEM, (QUESTION,)))
    assert (caught.value.status, caught.value.retryable) == (status, True)
    assert str(caught.value) == f"anthropic HTTP {status}: {message}"


@pytest.mark.parametrize(
    ("stop_reason", "expected"),
    [
        ("end_turn", STOP),
        ("stop_sequence", STOP),
        ("tool_use", TOOL_USE),
        ("max_tokens", "length"),
        ("refusal", "refusal"),
        ("pause_turn", "pause_turn"),
        (None, "missing"),
    ],
)
def test_anthropic_stop_reasons(
    anthropic_server: FakeProvider, stop_reason: str | None, expected: str
) -> None:
    anthropic_server.replies.append(
        message_reply([{"type": "text", "text": "ok"}], stop_reason=stop_reason)
    )
    assert anthropic_turn(anthropic_server, ModelRequest(SYSTEM, (QUESTION,))).stop_reason == (
        expected
    )


def test_anthropic_tool_input_that_is_not_an_object(anthropic_server: FakeProvider) -> None:
    anthropic_server.replies.append(
        message_reply(
            [{"type": "tool_use", "id": "toolu_1", "name": "bash", "input": "pwd"}],
            stop_reason="tool_use",
        )
    )
    with pytest.raises(ProviderHttpError) as caught:
        anthropic_turn(anthropic_server, ModelRequest(SYSTEM, (QUESTION,), (BASH,)))
    assert caught.value.retryable is False
    assert "'bash'" in caught.value.message and "not a JSON object" in caught.value.message


# ----- classification details ---------------------------------------------------------


def response(status: int, headers: dict[str, str] | None = None, body: bytes = b"") -> HttpResponse:
    return HttpResponse(status, headers or {}, body)


@pytest.mark.parametrize(
    ("status", "retryable"),
    [
        (400, False),
        (401, False),
        (403, False),
        (404, False),
        (422, False),
        (408, True),
        (429, True),
        (500, True),
        (503, True),
        (529, True),
    ],
)
def test_classify_statuses(status: int, retryable: bool) -> None:
    error = classify(response(status, body=b'{"error": {"message": "m"}}'), provider="p")
    assert error is not None
    assert (error.status, error.retryable, error.message) == (status, retryable, "m")


def test_classify_passes_2xx_and_reads_other_error_shapes() -> None:
    assert classify(response(200)) is None
    assert classify(response(204)) is None
    ollama = classify(response(404, body=b'{"error": "model \\"llama9\\" not found"}'))
    assert ollama is not None and ollama.message == 'model "llama9" not found'
    vllm = classify(response(400, body=b'{"object": "error", "message": "bad", "code": 400}'))
    assert vllm is not None and vllm.message == "bad"
    empty = classify(response(503))
    assert empty is not None and empty.message == "no error message in the response body"


def test_retry_after_forms() -> None:
    assert retry_after({"Retry-After": "2.5"}) == 2.5
    # OpenAI's millisecond header is the finer one.
    assert retry_after({"retry-after-ms": "1500", "retry-after": "2"}) == 1.5
    now = datetime(2025, 1, 1, tzinfo=UTC)
    later = format_datetime(now + timedelta(seconds=30), usegmt=True)
    assert retry_after({"Retry-After": later}, now=now.timestamp()) == 30.0
    assert retry_after({"Retry-After": "soon"}) is None
    assert retry_after({"Retry-After": "-1"}) is None
    assert retry_after({}) is None


def test_server_may_overrule_the_status_table() -> None:
    overruled = classify(response(500, {"x-should-retry": "false"}))
    assert overruled is not None and overruled.retryable is False
    allowed = classify(response(400, {"X-Should-Retry": "true", "Retry-After": "1"}))
    assert allowed is not None and (allowed.retryable, allowed.retry_after_s) == (True, 1.0)


def test_provider_http_error_survives_copying() -> None:
    import pickle

    error = ProviderHttpError(
        "slow down", provider="p", status=429, retryable=True, retry_after_s=3
    )
    copy = pickle.loads(pickle.dumps(error))
    assert (str(copy), copy.status, copy.retryable, copy.retry_after_s) == (
        "p HTTP 429: slow down",
        429,
        True,
        3,
    )


def test_wire_formats_by_kind() -> None:
    assert WIRE_FORMATS["openai"] is openai
    assert WIRE_FORMATS["anthropic"] is anthropic


# ----- pricing --------------------------------------------------------------------------


def test_cost_charges_each_kind_of_token_once() -> None:
    usage = Usage(
        input_tokens=1_000_000,
        output_tokens=200_000,
        requests=3,
        cache_read_tokens=400_000,
        cache_write_tokens=100_000,
    )
    price = Price(input=3.0, output=15.0, cache_read=0.3, cache_write=3.75)
    # 500k uncached x $3 + 400k read x $0.30 + 100k written x $3.75 + 200k out x $15.
    assert cost_usd(usage, price) == pytest.approx(1.5 + 0.12 + 0.375 + 3.0)
    assert cost_usd(Usage(), price) == 0.0


def test_unpriced_cost_is_unknown_not_zero() -> None:
    assert cost_usd(Usage(input_tokens=10, output_tokens=10, requests=1), None) is None


def test_cost_of_a_real_answer(anthropic_server: FakeProvider) -> None:
    anthropic_server.replies.append(
        message_reply(
            [{"type": "text", "text": "ok"}],
            usage={
                "input_tokens": 1_000,
                "output_tokens": 2_000,
                "cache_read_input_tokens": 10_000,
                "cache_creation_input_tokens": 0,
            },
        )
    )
    turn = anthropic_turn(anthropic_server, ModelRequest(SYSTEM, (QUESTION,)))
    cost = cost_usd(turn.usage, Price(input=3.0, output=15.0, cache_read=0.3))
    assert cost == pytest.approx((1_000 * 3.0 + 10_000 * 0.3 + 2_000 * 15.0) / 1e6)


def test_usage_sums_cache_counts() -> None:
    total = Usage(10, 2, 1, 4, 1) + Usage(5, 3, 1, 0, 2)
    assert total == Usage(15, 5, 2, 4, 3)
