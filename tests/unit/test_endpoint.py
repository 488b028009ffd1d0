"""The in-sandbox endpoint, driven by the official openai and anthropic SDKs: real clients
that no one here wrote."""

from __future__ import annotations

from collections.abc import Iterator

import anthropic
import openai
import pytest

from sandbox import faux
from sandbox.conversation import ModelRequest, ToolResultMessage
from sandbox.endpoint import Endpoint

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "write",
            "description": "Write a file.",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
                "required": ["path", "content"],
            },
        },
    }
]
seen: list[ModelRequest] = []


def _after_tool(request: ModelRequest) -> faux.FauxReply:
    result = next(m for m in request.messages if isinstance(m, ToolResultMessage))
    return faux.text(f"The tool said: {result.content}")


@pytest.fixture
def endpoint() -> Iterator[Endpoint]:
    model = faux.FauxModel(
        [faux.call("write", path="a.txt", content="hi"), _after_tool], name="faux/endpoint"
    )

    def complete(request: ModelRequest):  # type: ignore[no-untyped-def]
        seen.append(request)
        return model.complete(request)

    seen.clear()
    served = Endpoint(complete, "faux/endpoint").start()
    yield served
    served.stop()


def test_openai_sdk_tool_call_round_trip(endpoint: Endpoint) -> None:
    client = openai.OpenAI(base_url=endpoint.base_url, api_key=endpoint.key, max_retries=0)
    first = client.chat.completions.create(
        model="anything",
        messages=[
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "Write a.txt"},
        ],
        tools=TOOLS,  # type: ignore[arg-type]
    )
    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls"
    call = choice.message.tool_calls[0]  # type: ignore[index]
    assert (call.function.name, call.function.arguments) == (  # type: ignore[union-attr]
        "write",
        '{"path": "a.txt", "content": "hi"}',
    )
    assert first.model == "faux/endpoint" and first.usage is not None
    # What our endpoint made of the SDK's request: system apart, the tool schema kept.
    assert seen[0].system == "You are terse."
    assert [t.name for t in seen[0].tools] == ["write"]

    second = client.chat.completions.create(
        model="anything",
        messages=[
            {"role": "user", "content": "Write a.txt"},
            choice.message.model_dump(exclude_none=True),  # type: ignore[list-item]
            {"role": "tool", "tool_call_id": call.id, "content": "Wrote 2 bytes"},
        ],
    )
    assert second.choices[0].finish_reason == "stop"
    assert second.choices[0].message.content == "The tool said: Wrote 2 bytes"
    result = next(m for m in seen[1].messages if isinstance(m, ToolResultMessage))
    assert (result.tool_call_id, result.name) == (call.id, "write")


def test_wrong_key_is_refused_with_the_sdks_own_error(endpoint: Endpoint) -> None:
    client = openai.OpenAI(base_url=endpoint.base_url, api_key="sk-real-key", max_retries=0)
    with pytest.raises(openai.AuthenticationError, match="Incorrect API key"):
        client.chat.completions.create(model="x", messages=[{"role": "user", "content": "hi"}])
    assert endpoint.requests == 0


def test_bad_request_is_a_400(endpoint: Endpoint) -> None:
    client = openai.OpenAI(base_url=endpoint.base_url, api_key=endpoint.key, max_retries=0)
    with pytest.raises(openai.BadRequestError, match="unknown message role"):
        client.chat.completions.create(
            model="x",
            messages=[{"role": "narrator", "content": "hi"}],  # type: ignore[list-item, misc]
        )


def test_anthropic_sdk_tool_use_round_trip(endpoint: Endpoint) -> None:
    client = anthropic.Anthropic(
        base_url=endpoint.base_url.removesuffix("/v1"), api_key=endpoint.key, max_retries=0
    )
    tools = [
        {
            "name": "write",
            "description": "Write a file.",
            "input_schema": TOOLS[0]["function"]["parameters"],
        }
    ]  # type: ignore[index]
    first = client.messages.create(
        model="anything",
        max_tokens=256,
        system="You are terse.",
        messages=[{"role": "user", "content": "Write a.txt"}],
        tools=tools,  # type: ignore[arg-type]
    )
    assert first.stop_reason == "tool_use"
    (use,) = [block for block in first.content if block.type == "tool_use"]
    assert (use.name, use.input) == ("write", {"path": "a.txt", "content": "hi"})  # type: ignore[union-attr]
    assert seen[0].system == "You are terse." and [t.name for t in seen[0].tools] == ["write"]
    second = client.messages.create(
        model="anything",
        max_tokens=256,
        messages=[
            {"role": "user", "content": "Write a.txt"},
            {"role": "assistant", "content": [b.model_dump() for b in first.content]},  # type: ignore[misc]
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": use.id, "content": "Wrote 2 bytes"}
                ],  # type: ignore[union-attr]
            },
        ],
    )
    assert second.stop_reason == "end_turn"
    assert second.content[0].text == "The tool said: Wrote 2 bytes"  # type: ignore[union-attr]
    result = next(m for m in seen[1].messages if isinstance(m, ToolResultMessage))
    assert (result.tool_call_id, result.name) == (use.id, "write")  # type: ignore[union-attr]


def test_anthropic_sdk_wrong_key(endpoint: Endpoint) -> None:
    client = anthropic.Anthropic(
        base_url=endpoint.base_url.removesuffix("/v1"), api_key="sk-ant-real", max_retries=0
    )
    with pytest.raises(anthropic.AuthenticationError, match="Incorrect API key"):
        client.messages.create(
            model="x", max_tokens=16, messages=[{"role": "user", "content": "hi"}]
        )
