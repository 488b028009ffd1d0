"""The conversation an agent has with a model, independent of any provider's wire format."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from sandbox.protocol import ErrorKind, ToolCall, Usage


@dataclass(frozen=True)
class UserMessage:
    """A user turn of the conversation: the case's prompt, or a later step of it."""

    content: str
    role: Literal["user"] = "user"


@dataclass(frozen=True)
class AssistantMessage:
    """The model's turn: its text and the tools it asked to call."""

    content: str
    tool_calls: tuple[ToolCall, ...] = ()
    stop_reason: str = "stop"
    role: Literal["assistant"] = "assistant"


@dataclass(frozen=True)
class ToolResultMessage:
    """What one tool call gave back, answered to the model by its call's id."""

    tool_call_id: str
    name: str
    content: str
    is_error: bool = False
    role: Literal["tool"] = "tool"


Message = UserMessage | AssistantMessage | ToolResultMessage


@dataclass(frozen=True)
class ToolSpec:
    """What the model is told about a tool."""

    name: str
    description: str
    parameters: dict[str, Any]


@dataclass(frozen=True)
class ModelRequest:
    """One request to a model: the system prompt, the conversation so far, the tools."""

    system: str
    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...] = ()

    def last_user_text(self) -> str:
        for message in reversed(self.messages):
            if isinstance(message, UserMessage):
                return message.content
        return ""


# Stop reasons a provider may give; anything else ends the trial as an agent error.
STOP = "stop"
TOOL_USE = "tool_use"


@dataclass(frozen=True)
class AssistantTurn:
    """One model answer: what the agent loop consumes."""

    text: str
    tool_calls: tuple[ToolCall, ...] = ()
    stop_reason: str = STOP
    usage: Usage = field(default_factory=Usage)
    model: str = ""


class ProviderError(Exception):
    """The model provider failed to answer; the trial ends with this `kind`."""

    kind: ErrorKind = "provider_error"
