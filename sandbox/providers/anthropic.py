"""Anthropic Messages API.

`base_url` ends where the API's paths begin, version included:
`https://api.anthropic.com/v1`, so requests go to `{base_url}/messages`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sandbox.conversation import (
    STOP,
    TOOL_USE,
    AssistantMessage,
    AssistantTurn,
    ModelRequest,
    ToolResultMessage,
)
from sandbox.protocol import ToolCall, Usage
from sandbox.providers.wire import (
    HttpRequest,
    HttpResponse,
    decode_json,
    encode_json,
    malformed,
)

KIND = "anthropic"
API_VERSION = "2023-06-01"
# Anthropic requires max_tokens on every request; this is enough for an agent's turn.
DEFAULT_MAX_TOKENS = 4096

_STOP_REASONS = {
    "end_turn": STOP,
    "stop_sequence": STOP,
    "tool_use": TOOL_USE,
    "max_tokens": "length",
}


def build_request(
    base_url: str,
    model_id: str,
    request: ModelRequest,
    *,
    api_key: str | None,
    headers: Mapping[str, str] | None = None,
    max_tokens: int | None = None,
) -> HttpRequest:
    """POST {base_url}/messages for one model turn."""
    body: dict[str, Any] = {
        "model": model_id,
        "max_tokens": DEFAULT_MAX_TOKENS if max_tokens is None else max_tokens,
        "messages": _messages(request),
    }
    # An empty system prompt is left out rather than sent as an empty text.
    if request.system:
        body["system"] = request.system
    if request.tools:
        body["tools"] = [
            {"name": tool.name, "description": tool.description, "input_schema": tool.parameters}
            for tool in request.tools
        ]
    out_headers = {
        "content-type": "application/json",
        "accept": "application/json",
        "anthropic-version": API_VERSION,
    }
    if api_key:
        out_headers["x-api-key"] = api_key
    out_headers.update(headers or {})
    return HttpRequest(
        method="POST",
        url=base_url.rstrip("/") + "/messages",
        headers=out_headers,
        body=encode_json(body),
    )


def _messages(request: ModelRequest) -> list[dict[str, Any]]:
    """The conversation as Anthropic wants it: user and assistant strictly alternating.

    Tool results travel in a user message, so a run of them (and any user text after them)
    becomes one user message: tool_result blocks first, as the API requires.
    """
    out: list[dict[str, Any]] = []
    for message in request.messages:
        role: str
        blocks: list[dict[str, Any]]
        if isinstance(message, AssistantMessage):
            role = "assistant"
            blocks = []
            # Anthropic rejects empty text blocks.
            if message.content:
                blocks.append({"type": "text", "text": message.content})
            blocks.extend(
                {"type": "tool_use", "id": call.id, "name": call.name, "input": call.arguments}
                for call in message.tool_calls
            )
        elif isinstance(message, ToolResultMessage):
            role = "user"
            blocks = [
                {
                    "type": "tool_result",
                    "tool_use_id": message.tool_call_id,
                    "content": message.content,
                    "is_error": message.is_error,
                }
            ]
        else:
            role = "user"
            blocks = [{"type": "text", "text": message.content}] if message.content else []
        if not blocks:
            # A message with nothing in it is rejected; dropping it lets its neighbours merge.
            continue
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})
    return out


def parse_response(response: HttpResponse, *, provider: str = KIND) -> AssistantTurn:
    """The message as an AssistantTurn; a failure raises ProviderHttpError.

    `provider` names the provider in error messages ("anthropic HTTP 529: Overloaded").
    """
    data = decode_json(response, provider=provider)
    content = data.get("content")
    if not isinstance(content, list):
        raise malformed(provider, "the response has no content list", response)
    texts: list[str] = []
    tool_calls: list[ToolCall] = []
    for block in content:
        if not isinstance(block, dict):
            raise malformed(provider, "a content block is not an object", response)
        kind = block.get("type")
        if kind == "text" and isinstance(block.get("text"), str):
            texts.append(block["text"])
        elif kind == "tool_use":
            name, call_id, arguments = block.get("name"), block.get("id"), block.get("input")
            if not isinstance(name, str) or not name:
                raise malformed(provider, "a tool_use block has no name", response)
            if not isinstance(call_id, str) or not call_id:
                raise malformed(provider, f"the tool_use block for {name!r} has no id", response)
            if not isinstance(arguments, dict):
                raise malformed(
                    provider,
                    f"the model's input for tool {name!r} is unusable: it is not a JSON object",
                    response,
                )
            tool_calls.append(ToolCall(id=call_id, name=name, arguments=arguments))
        # Thinking and server-tool blocks are not part of the agent's conversation.
    stop = data.get("stop_reason")
    model = data.get("model")
    return AssistantTurn(
        # Consecutive text blocks are pieces of one text (citations split it), so no separator.
        text="".join(texts),
        tool_calls=tuple(tool_calls),
        stop_reason=_STOP_REASONS.get(stop, stop) if isinstance(stop, str) else "missing",
        usage=_usage(data.get("usage")),
        model=model if isinstance(model, str) else "",
    )


def _count(data: Mapping[str, Any], key: str) -> int:
    # Cache counts may be null as well as absent.
    value = data.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _usage(raw: Any) -> Usage:
    if not isinstance(raw, dict):
        return Usage(requests=1)
    cache_read = _count(raw, "cache_read_input_tokens")
    cache_write = _count(raw, "cache_creation_input_tokens")
    return Usage(
        # Anthropic's input_tokens excludes the cached parts; Usage.input_tokens is all
        # prompt tokens, as with OpenAI, so the parts are added back.
        input_tokens=_count(raw, "input_tokens") + cache_read + cache_write,
        output_tokens=_count(raw, "output_tokens"),
        requests=1,
        cache_read_tokens=cache_read,
        cache_write_tokens=cache_write,
    )
