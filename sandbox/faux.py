"""The faux model: a case scripts the model's answers, so a trial is reproducible.

A script is a list of steps; each step is a reply or a function of the request that
returns one, so a test can react to what the agent actually sent (its system prompt, the
tool results it saw). Usage is estimated as ceil(characters / 4), like pi's faux provider.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from sandbox.conversation import (
    STOP,
    TOOL_USE,
    AssistantMessage,
    AssistantTurn,
    ModelRequest,
    ProviderError,
    ToolResultMessage,
    UserMessage,
)
from sandbox.protocol import ToolCall, Usage


@dataclass(frozen=True)
class FauxReply:
    """One scripted reply of a faux model: text, tool calls, or an error to raise."""

    text: str = ""
    tool_calls: tuple[tuple[str, dict[str, Any]], ...] = ()
    stop_reason: str | None = None
    error: str | None = None
    model: str | None = None


FauxStep = FauxReply | Callable[[ModelRequest], FauxReply]


def text(content: str, *, stop_reason: str = STOP) -> FauxReply:
    """A final answer."""
    return FauxReply(text=content, stop_reason=stop_reason)


def call(name: str, /, **arguments: Any) -> FauxReply:
    """One tool call."""
    return FauxReply(tool_calls=((name, arguments),))


def calls(*tool_calls: tuple[str, dict[str, Any]], text: str = "") -> FauxReply:
    """Several tool calls in one turn."""
    return FauxReply(text=text, tool_calls=tuple(tool_calls))


def bash(command: str, *, timeout: float | None = None) -> FauxReply:
    arguments: dict[str, Any] = {"command": command}
    if timeout is not None:
        arguments["timeout"] = timeout
    return FauxReply(tool_calls=(("bash", arguments),))


def error(message: str) -> FauxReply:
    """The provider fails with this message."""
    return FauxReply(error=message)


def request_chars(request: ModelRequest) -> int:
    """Characters a provider would read: the basis of the ceil(chars / 4) token estimate."""
    total = len(request.system)
    for tool in request.tools:
        total += len(tool.name) + len(tool.description) + len(json.dumps(tool.parameters))
    for message in request.messages:
        if isinstance(message, UserMessage | ToolResultMessage):
            total += len(message.content)
        elif isinstance(message, AssistantMessage):
            total += len(message.content)
            total += sum(len(json.dumps(c.arguments)) + len(c.name) for c in message.tool_calls)
    return total


class FauxModel:
    def __init__(self, script: Sequence[FauxStep], name: str = "faux") -> None:
        self._queue = list(script)
        self.name = name
        self._ids = itertools.count(1)

    def complete(self, request: ModelRequest) -> AssistantTurn:
        if not self._queue:
            raise ProviderError("No more faux responses queued")
        step = self._queue.pop(0)
        reply = step(request) if callable(step) else step
        if not isinstance(reply, FauxReply):
            raise ProviderError(
                f"A faux script step returned {type(reply).__name__}, not a FauxReply; "
                "build replies with sandbox.faux.text/call/calls/bash/error."
            )
        if reply.error is not None:
            raise ProviderError(reply.error)
        tool_calls = tuple(
            ToolCall(id=f"call_{next(self._ids)}", name=name, arguments=dict(args))
            for name, args in reply.tool_calls
        )
        out_chars = len(reply.text) + sum(
            len(c.name) + len(json.dumps(c.arguments)) for c in tool_calls
        )
        stop = reply.stop_reason or (TOOL_USE if tool_calls else STOP)
        return AssistantTurn(
            text=reply.text,
            tool_calls=tool_calls,
            stop_reason=stop,
            usage=Usage(
                input_tokens=math.ceil(request_chars(request) / 4),
                output_tokens=math.ceil(out_chars / 4),
                requests=1,
            ),
            model=reply.model or self.name,
        )
