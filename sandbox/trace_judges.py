"""Judges of the transcript (`AgentRun.events`): which tool calls the agent made.

A transcript is what the agent did through its tools, not the state of the world it left:
pair these with judges that read the workspace when the outcome is what matters.

    from sandbox.trace_judges import call, tool_called, tool_sequence, no_tool_errors
    judges=[
        tool_called(call("write", path="hello.txt", content=regex(r"^Hello"))),
        tool_sequence(call("read", path="config.ini"), call("edit", path="config.ini")),
        tool_called(call("bash"), never=True),
        no_tool_errors(),
        tool_call_count(max=5),
    ]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sandbox.matchers import describe, mismatch, quote
from sandbox.protocol import ToolCallEvent, ToolResultEvent
from sandbox.suite import AgentRun, Judge

# How many near misses a detail lists when no call matched.
NEAR_MISSES = 3


@dataclass(frozen=True)
class CallSpec:
    """A tool call to look for: the tool's name and matchers of some of its arguments (an
    exact value, a compiled regex, or a predicate; see sandbox.matchers). Arguments not
    named may hold anything."""

    tool: str
    args: Mapping[str, Any] = field(default_factory=dict)

    def why_not(self, event: ToolCallEvent) -> str | None:
        """None when the call matches, else what differs."""
        if event.name != self.tool:
            return f"tool {event.name!r}, not {self.tool!r}"
        arguments = event.arguments if isinstance(event.arguments, dict) else {}
        for key, expected in self.args.items():
            if key not in arguments:
                return f"no argument {key!r}"
            if (why := mismatch(expected, arguments[key])) is not None:
                return f"argument {key!r}: {why}"
        return None

    def __str__(self) -> str:
        shown = ", ".join(f"{k}={describe(v)}" for k, v in self.args.items())
        return f"{self.tool}({shown})"


def call(tool: str, **args: Any) -> CallSpec:
    """`call("write", path="a.txt", content=regex("^ok"))`."""
    return CallSpec(tool, dict(args))


def _spec(spec: CallSpec | str) -> CallSpec:
    return CallSpec(spec) if isinstance(spec, str) else spec


def tool_calls(run: AgentRun) -> list[ToolCallEvent]:
    return [e for e in run.events if isinstance(e, ToolCallEvent)]


def _where(index: int, event: ToolCallEvent) -> str:
    return f"call #{index + 1} {event.name}({quote(event.arguments)})"


def _near_misses(spec: CallSpec, calls: Sequence[ToolCallEvent]) -> str:
    same_tool = [(i, c) for i, c in enumerate(calls) if c.name == spec.tool]
    if not same_tool:
        names = sorted({c.name for c in calls})
        return f"no {spec.tool!r} call among {len(calls)} calls (tools used: {names or 'none'})"
    shown = "; ".join(f"#{i + 1}: {spec.why_not(c)}" for i, c in same_tool[:NEAR_MISSES])
    more = f" (and {len(same_tool) - NEAR_MISSES} more)" if len(same_tool) > NEAR_MISSES else ""
    return f"{len(same_tool)} {spec.tool!r} calls, none matched: {shown}{more}"


def tool_called(spec: CallSpec | str, *, never: bool = False, name: str | None = None) -> Judge:
    """Passes when a call matching `spec` appears in the transcript (or, with `never`, when
    none does). The detail names the call that matched, or the near misses."""
    wanted = _spec(spec)

    def check(run: AgentRun) -> tuple[float, str]:
        calls = tool_calls(run)
        for index, event in enumerate(calls):
            if wanted.why_not(event) is None:
                found = f"{wanted} matched {_where(index, event)}"
                return (0.0, found) if never else (1.0, found)
        if never:
            return 1.0, f"no call matched {wanted}"
        return 0.0, f"{wanted} missing: {_near_misses(wanted, calls)}"

    default = f"{'tool_not_called' if never else 'tool_called'}({wanted})"
    return Judge(name=name or default, fn=check)


def tool_sequence(*specs: CallSpec | str, ordered: bool = True, name: str | None = None) -> Judge:
    """Passes when every spec is matched by a call of its own: in the given order (other
    calls may come between) or, with `ordered=False`, in any order. Scores the share of
    specs matched, so the detail and the score say how far the agent got."""
    wanted = [_spec(s) for s in specs]
    if not wanted:
        raise ValueError("tool_sequence needs at least one call to look for.")

    def check(run: AgentRun) -> tuple[float, str]:
        calls = tool_calls(run)
        matched = _in_order(wanted, calls) if ordered else _any_order(wanted, calls)
        missing = [spec for i, spec in enumerate(wanted) if i not in matched]
        found = ", ".join(f"{wanted[i]} at #{matched[i] + 1}" for i in sorted(matched))
        if not missing:
            return 1.0, f"all {len(wanted)} matched: {found}"
        first = missing[0]
        why = "after the previous match" if ordered else "by a call not already matched"
        detail = (
            f"{len(missing)} of {len(wanted)} missing; first missing: {first} {why} "
            f"({_near_misses(first, calls)})"
        )
        return len(matched) / len(wanted), detail + (f"; matched: {found}" if found else "")

    kind = "tool_sequence" if ordered else "tool_set"
    return Judge(name=name or f"{kind}({', '.join(map(str, wanted))})", fn=check)


def _in_order(specs: Sequence[CallSpec], calls: Sequence[ToolCallEvent]) -> dict[int, int]:
    """Spec index -> call index of the longest prefix of specs found as a subsequence;
    greedy earliest matching finds a subsequence whenever one exists."""
    matched: dict[int, int] = {}
    position = 0
    for spec_index, spec in enumerate(specs):
        while position < len(calls) and spec.why_not(calls[position]) is not None:
            position += 1
        if position == len(calls):
            break
        matched[spec_index] = position
        position += 1
    return matched


def _any_order(specs: Sequence[CallSpec], calls: Sequence[ToolCallEvent]) -> dict[int, int]:
    """A largest matching of specs to distinct calls (augmenting paths: a call that fits two
    specs is given to the one that needs it)."""
    fits = [[c for c, event in enumerate(calls) if spec.why_not(event) is None] for spec in specs]
    owner: dict[int, int] = {}  # call index -> spec index

    def place(spec_index: int, seen: set[int]) -> bool:
        for call_index in fits[spec_index]:
            if call_index in seen:
                continue
            seen.add(call_index)
            if call_index not in owner or place(owner[call_index], seen):
                owner[call_index] = spec_index
                return True
        return False

    for spec_index in range(len(specs)):
        place(spec_index, set())
    return {spec_index: call_index for call_index, spec_index in owner.items()}


def no_tool_errors(*tools: str, name: str | None = None) -> Judge:
    """Passes when no tool call (of `tools`, or any) returned an error."""

    def check(run: AgentRun) -> tuple[float, str]:
        results = [
            e
            for e in run.events
            if isinstance(e, ToolResultEvent) and (not tools or e.name in tools)
        ]
        failed = [e for e in results if e.error is not None]
        if not failed:
            return 1.0, f"none of {len(results)} tool results was an error"
        first = failed[0]
        return 0.0, (
            f"{len(failed)} of {len(results)} tool calls failed; first: {first.name} "
            f"({first.tool_call_id}): {quote(first.error)}"
        )

    return Judge(name=name or f"no_tool_errors({', '.join(tools)})", fn=check)


def tool_call_count(
    *, min: int = 0, max: int | None = None, tool: str | None = None, name: str | None = None
) -> Judge:
    """Passes when the number of tool calls (of `tool`, or all) is within [min, max]."""
    if min < 0 or (max is not None and max < min):
        raise ValueError(f"tool_call_count needs 0 <= min <= max; got min={min}, max={max}.")

    def check(run: AgentRun) -> tuple[float, str]:
        count = sum(1 for e in tool_calls(run) if tool is None or e.name == tool)
        bounds = f"[{min}, {'inf' if max is None else max}]"
        what = f"{tool!r} calls" if tool else "tool calls"
        ok = count >= min and (max is None or count <= max)
        return (1.0 if ok else 0.0), f"{count} {what}, {'within' if ok else 'outside'} {bounds}"

    shown = f"{tool}, " if tool else ""
    return Judge(name=name or f"tool_call_count({shown}{min}..{max})", fn=check)
