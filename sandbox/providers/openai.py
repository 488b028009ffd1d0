"""OpenAI Chat Completions: the format OpenAI, vLLM, llama.cpp's server, Ollama and
OpenRouter all speak.

`base_url` ends where the API's paths begin, as in the official SDK:
`https://api.openai.com/v1`, `http://localhost:11434/v1`, `https://openrouter.ai/api/v1`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from sandbox.conversation import (
    STOP,
    TOOL_USE,
    AssistantTurn,
    Message,
    ModelRequest,
    ToolResultMessage,
    UserMessage,
)
from sandbox.protocol import ToolCall, Usage
from sandbox.providers.wire import (
    HttpRequest,
    HttpResponse,
    ProviderHttpError,
    decode_json,
    encode_json,
    malformed,
)

KIND = "openai"

_FINISH_REASONS = {
    "stop": STOP,
    "tool_calls": TOOL_USE,
    # The pre-tools name for the same thing, still sent by some compatible servers.
    "function_call": TOOL_USE,
    "length": "length",
    "content_filter": "content_filter",
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
    """POST {base_url}/chat/completions for one model turn."""
    messages: list[dict[str, Any]] = []
    # An empty system message is noise some local servers' chat templates choke on.
    if request.system:
        messages.append({"role": "system", "content": request.system})
    messages.extend(_message(message) for message in request.messages)
    body: dict[str, Any] = {"model": model_id, "messages": messages}
    # OpenAI rejects `"tools": []` ("[] is too short"), so no tools means no key.
    if request.tools:
        body["tools"] = [
            {
                "type": "function",
                "function": {
                    "name": tool.name,
                    "description": tool.description,
                    "parameters": tool.parameters,
                },
            }
            for tool in request.tools
        ]
    if max_tokens is not None:
        # `max_tokens`, not the newer `max_completion_tokens`: every compatible server
        # (vLLM, llama.cpp, Ollama, OpenRouter) understands it.
        body["max_tokens"] = max_tokens
    out_headers = {"Content-Type": "application/json", "Accept": "application/json"}
    # Local servers (llama.cpp, Ollama) need no key; sending an empty bearer would be wrong.
    if api_key:
        out_headers["Authorization"] = f"Bearer {api_key}"
    out_headers.update(headers or {})
    return HttpRequest(
        method="POST",
        url=base_url.rstrip("/") + "/chat/completions",
        headers=out_headers,
        body=encode_json(body),
    )


def _message(message: Message) -> dict[str, Any]:
    if isinstance(message, UserMessage):
        return {"role": "user", "content": message.content}
    if isinstance(message, ToolResultMessage):
        # Chat Completions has no error flag for a tool result; the content says it.
        return {"role": "tool", "tool_call_id": message.tool_call_id, "content": message.content}
    out: dict[str, Any] = {"role": "assistant", "content": message.content}
    if message.tool_calls:
        # The documented shape: content may be null when the turn is only tool calls.
        out["content"] = message.content or None
        out["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {
                    "name": call.name,
                    "arguments": json.dumps(call.arguments, ensure_ascii=False),
                },
            }
            for call in message.tool_calls
        ]
    return out


def parse_response(response: HttpResponse, *, provider: str = KIND) -> AssistantTurn:
    """The first choice as an AssistantTurn; a failure raises ProviderHttpError.

    `provider` names the provider in error messages ("openrouter HTTP 429: ...").
    """
    data = decode_json(response, provider=provider)
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise malformed(provider, "the response has no choices", response)
    choice = choices[0]
    message = choice.get("message")
    if not isinstance(message, dict):
        raise malformed(provider, "the first choice has no message", response)
    tool_calls = tuple(
        _tool_call(raw, provider, response) for raw in message.get("tool_calls") or ()
    )
    finish = choice.get("finish_reason")
    if tool_calls and finish in ("stop", None):
        # Some servers (older Ollama, some llama.cpp builds) say "stop" with tool calls; the
        # calls are what the agent must act on.
        stop_reason = TOOL_USE
    elif finish is None:
        stop_reason = "missing"
    else:
        stop_reason = _FINISH_REASONS.get(str(finish), str(finish))
    model = data.get("model")
    return AssistantTurn(
        text=_text(message.get("content")),
        tool_calls=tool_calls,
        stop_reason=stop_reason,
        usage=_usage(data.get("usage")),
        model=model if isinstance(model, str) else "",
    )


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        # A few compatible servers answer with content parts, as requests may carry.
        return "".join(
            part["text"]
            for part in content
            if isinstance(part, dict) and isinstance(part.get("text"), str)
        )
    return ""


def _tool_call(raw: Any, provider: str, response: HttpResponse) -> ToolCall:
    if not isinstance(raw, dict) or not isinstance(raw.get("function"), dict):
        raise malformed(provider, "a tool call in the response has no function", response)
    function = raw["function"]
    name = function.get("name")
    call_id = raw.get("id")
    if not isinstance(name, str) or not name:
        raise malformed(provider, "a tool call in the response has no name", response)
    if not isinstance(call_id, str) or not call_id:
        raise malformed(provider, f"the tool call to {name!r} has no id", response)
    arguments = function.get("arguments")
    if isinstance(arguments, dict):
        # Not the documented string, but what a few servers send; it is unambiguous.
        return ToolCall(id=call_id, name=name, arguments=arguments)
    if arguments is None or (isinstance(arguments, str) and not arguments.strip()):
        # Some servers send "" for a call without arguments.
        return ToolCall(id=call_id, name=name, arguments={})
    if not isinstance(arguments, str):
        raise _bad_arguments(provider, name, "they are not a JSON string", response)
    try:
        decoded = json.loads(arguments)
    except ValueError as exc:
        raise _bad_arguments(provider, name, f"they are not valid JSON ({exc})", response) from None
    if not isinstance(decoded, dict):
        raise _bad_arguments(provider, name, "they are not a JSON object", response)
    return ToolCall(id=call_id, name=name, arguments=decoded)


def _bad_arguments(provider: str, name: str, why: str, response: HttpResponse) -> ProviderHttpError:
    return malformed(
        provider, f"the model's arguments for tool {name!r} are unusable: {why}", response
    )


def _count(data: Mapping[str, Any], key: str) -> int:
    value = data.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _usage(raw: Any) -> Usage:
    if not isinstance(raw, dict):
        return Usage(requests=1)
    details = raw.get("prompt_tokens_details")
    cached = _count(details, "cached_tokens") if isinstance(details, dict) else 0
    return Usage(
        # prompt_tokens already includes the cached part, as Usage.input_tokens does.
        input_tokens=_count(raw, "prompt_tokens"),
        output_tokens=_count(raw, "completion_tokens"),
        requests=1,
        cache_read_tokens=cached,
    )
