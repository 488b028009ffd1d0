"""The relay: the worker's model client sends each request over the channel, and the
control plane's gateway adds the key, calls the provider, and sends the answer back.

Keys never enter the container, so it keeps `--network none`, and the gateway's usage
records are authoritative (the agent cannot under-report what it spent).
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass
from typing import Any, Literal

from sandbox.conversation import (
    AssistantMessage,
    AssistantTurn,
    Message,
    ModelRequest,
    ProviderError,
    ToolResultMessage,
    ToolSpec,
    UserMessage,
)
from sandbox.protocol import PROTOCOL_VERSION, ErrorKind, ToolCall, Usage

ReplyErrorKind = Literal["provider_error", "limit_exceeded"]


@dataclass(frozen=True)
class ModelCallMessage:
    """worker -> control plane: one model request, for the trial's own model."""

    id: str
    request: ModelRequest
    type: Literal["model_call"] = "model_call"


@dataclass(frozen=True)
class ReplyError:
    """Why the control plane's relay gave no model reply, as it said."""

    kind: ReplyErrorKind
    message: str


@dataclass(frozen=True)
class ModelReplyMessage:
    """control plane -> worker: the model's answer, or why there is none."""

    id: str
    turn: AssistantTurn | None = None
    error: ReplyError | None = None
    type: Literal["model_reply"] = "model_reply"
    protocol: int = PROTOCOL_VERSION


class BudgetExceeded(ProviderError):
    """The gateway refused to send a request that would pass the trial's budget."""

    kind: ErrorKind = "limit_exceeded"


def decode_reply(line: bytes) -> ModelReplyMessage:
    """The worker's side: the control plane is trusted, the shape is still checked."""
    data = json.loads(line)
    if data.get("type") != "model_reply":
        raise ValueError(f"Expected a model_reply, got {data.get('type')!r}.")
    turn = data.get("turn")
    error = data.get("error")
    return ModelReplyMessage(
        id=str(data["id"]),
        turn=AssistantTurn(
            text=str(turn["text"]),
            tool_calls=tuple(ToolCall(**c) for c in turn.get("tool_calls", ())),
            stop_reason=str(turn["stop_reason"]),
            usage=Usage(**turn.get("usage", {})),
            model=str(turn.get("model", "")),
        )
        if turn is not None
        else None,
        error=ReplyError(kind=error["kind"], message=str(error["message"])) if error else None,
    )


def _message(data: dict[str, Any]) -> Message:
    role = data["role"]
    if role == "user":
        return UserMessage(str(data["content"]))
    if role == "assistant":
        return AssistantMessage(
            str(data["content"]),
            tuple(
                ToolCall(str(c["id"]), str(c["name"]), dict(c["arguments"]))
                for c in data.get("tool_calls") or ()
            ),
            str(data.get("stop_reason", "stop")),
        )
    if role == "tool":
        return ToolResultMessage(
            str(data["tool_call_id"]),
            str(data["name"]),
            str(data["content"]),
            bool(data.get("is_error", False)),
        )
    raise ValueError(f"unknown message role {role!r}")


def decode_call(data: dict[str, Any]) -> ModelCallMessage:
    """A model call as the supervisor receives it from the worker in direct mode."""
    request = data["request"]
    return ModelCallMessage(
        id=str(data["id"]),
        request=ModelRequest(
            system=str(request["system"]),
            messages=tuple(_message(m) for m in request["messages"]),
            tools=tuple(
                ToolSpec(str(t["name"]), str(t["description"]), dict(t["parameters"]))
                for t in request.get("tools") or ()
            ),
        ),
    )


class RelayModel:
    """A model reached through the control plane's gateway."""

    def __init__(
        self, name: str, send: Any, receive: Any, *, message: Any = ModelCallMessage
    ) -> None:
        self.name = name
        self._send = send
        self._receive = receive
        # The call's message type: the agent's model_call, or a judge_call (sandbox.graded).
        self._message = message
        self._ids = itertools.count(1)

    def complete(self, request: ModelRequest) -> AssistantTurn:
        call_id = f"call-{next(self._ids)}"
        self._send(self._message(id=call_id, request=request))
        while True:
            line = self._receive()
            if not line:
                raise ProviderError("The control plane closed the channel during a model call.")
            reply = decode_reply(line)
            if reply.id == call_id:
                break
        if reply.error is not None:
            if reply.error.kind == "limit_exceeded":
                raise BudgetExceeded(reply.error.message)
            raise ProviderError(reply.error.message)
        if reply.turn is None:
            raise ProviderError("The gateway answered with neither a turn nor an error.")
        return reply.turn
