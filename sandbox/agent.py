"""The built-in agent loop: ask the model, run the tools it calls, until it stops.

Completion is strict, as in pi-evals: a run with no assistant message, a stop for any
reason but a normal stop or tool use, or an empty final answer is a failed run, each with
its own message, never a silent pass to the judges.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from sandbox.caps import TOOL_CALLS, TOOL_CALLS_PER_TURN, CapExceeded
from sandbox.conversation import (
    STOP,
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
from sandbox.model_choice import Model
from sandbox.protocol import (
    ErrorKind,
    Event,
    MessageEvent,
    ToolCall,
    ToolCallEvent,
    ToolResultEvent,
    Usage,
)
from sandbox.tools.base import Tool, ToolContext, ToolError


class AgentFailure(Exception):
    """The run ended without a usable answer; `kind` is the trial's error kind."""

    def __init__(self, kind: ErrorKind, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


@dataclass
class AgentState:
    """What the run produced so far; kept even when the run fails."""

    final_text: str = ""
    usage: Usage = field(default_factory=Usage)
    tool_calls: int = 0
    turns: int = 0
    model_returned: str | None = None
    assistant_messages: int = 0

    def record(self, turn: AssistantTurn, emit: Callable[[Event], None]) -> None:
        """Count one model answer and put it in the transcript."""
        self.assistant_messages += 1
        self.usage = self.usage + turn.usage
        self.model_returned = turn.model or self.model_returned
        emit(
            MessageEvent(
                role="assistant",
                content=turn.text,
                tool_calls=list(turn.tool_calls),
                stop_reason=turn.stop_reason,
                model=turn.model,
                usage=turn.usage,
            )
        )


def _run_tool(tool: Tool | None, call: ToolCall, ctx: ToolContext) -> tuple[str, str | None]:
    if tool is None:
        return "", f"Unknown tool {call.name!r}."
    try:
        return tool.run(call.arguments, ctx), None
    except ToolError as exc:
        return "", str(exc)
    except Exception as exc:  # a tool bug must reach the model as an error, not end the trial
        return "", f"{type(exc).__name__}: {exc}"


def check_completion(state: AgentState, turn: AssistantTurn | None) -> None:
    if turn is None or state.assistant_messages == 0:
        raise AgentFailure("agent_error", "The agent produced no assistant message.")
    if turn.stop_reason not in (STOP, TOOL_USE):
        raise AgentFailure(
            "agent_error", f"The agent stopped for an unexpected reason: {turn.stop_reason}."
        )
    if not turn.text.strip():
        raise AgentFailure("agent_error", "The agent's final message is empty.")


def run_agent(
    model: Model,
    *,
    system: str,
    prompts: Sequence[str],
    tools: Sequence[Tool],
    ctx: ToolContext,
    max_turns: int,
    emit: Callable[[Event], None],
    state: AgentState,
    after_tool: Callable[[], None] | None = None,
    max_tool_calls: int = 1000,
    max_tool_calls_per_turn: int = 64,
) -> None:
    """Run every prompt of the case in turn; raises AgentFailure when the run fails, and
    CapExceeded when the model asks for more tool calls than the trial allows."""
    by_name = {tool.name: tool for tool in tools}
    specs = tuple(ToolSpec(t.name, t.description, t.parameters) for t in tools)
    messages: list[Message] = []
    for prompt in prompts:
        messages.append(UserMessage(prompt))
        emit(MessageEvent(role="user", content=prompt))
        last: AssistantTurn | None = None
        while True:
            if state.turns >= max_turns:
                raise AgentFailure(
                    "limit_exceeded", f"The agent used all {max_turns} turns without finishing."
                )
            state.turns += 1
            try:
                last = model.complete(ModelRequest(system, tuple(messages), specs))
            except ProviderError as exc:
                raise AgentFailure(exc.kind, str(exc)) from None
            state.record(last, emit)
            messages.append(AssistantMessage(last.text, last.tool_calls, last.stop_reason))
            if not last.tool_calls:
                break
            if len(last.tool_calls) > max_tool_calls_per_turn:
                raise CapExceeded(
                    TOOL_CALLS_PER_TURN,
                    f"The model asked for {len(last.tool_calls)} tool calls in one turn; "
                    f"a turn may make {max_tool_calls_per_turn}.",
                )
            if state.tool_calls + len(last.tool_calls) > max_tool_calls:
                raise CapExceeded(
                    TOOL_CALLS, f"The agent reached its cap of {max_tool_calls} tool calls."
                )
            for call in last.tool_calls:
                state.tool_calls += 1
                emit(ToolCallEvent(id=call.id, name=call.name, arguments=call.arguments))
                content, error = _run_tool(by_name.get(call.name), call, ctx)
                emit(
                    ToolResultEvent(
                        tool_call_id=call.id, name=call.name, content=content, error=error
                    )
                )
                messages.append(
                    ToolResultMessage(call.id, call.name, error or content, error is not None)
                )
                if after_tool is not None:
                    after_tool()
        check_completion(state, last)
        state.final_text = last.text if last is not None else ""
