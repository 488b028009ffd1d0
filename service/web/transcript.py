"""A trial's transcript as a list: messages, tool calls and their results, worker steps.

The payloads are the stored events (sandbox/protocol.py's dataclasses as dicts). They came
out of the container, so every field is shown as text (`templates/_transcript.html`
escapes it) and unknown shapes are shown raw rather than trusted.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from service.api.schemas import EventView
from service.web.templating import render


@dataclass(frozen=True)
class Call:
    """A tool call a message asks for; `arguments` is None when its own event follows."""

    name: Any
    arguments: str | None


@dataclass(frozen=True)
class Item:
    """One event as the transcript shows it. `kind` picks the layout: message, tool_call,
    tool_result, lifecycle or other."""

    kind: str
    cls: str  # the item's CSS classes
    seq: int
    type: str  # the event type, as a class-safe token
    label: Any  # the bold lead: a role, "tool call", "result", a step, an event type
    details: str = ""  # a message's model, stop reason and usage
    content: Any = None  # a message's or result's text
    calls: tuple[Call, ...] = ()
    name: Any = None  # the tool
    error: Any = None  # a tool result's error
    detail: Any = None  # a lifecycle step's detail
    json: str = ""  # a tool call's arguments, or an unknown event's payload


def _json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True)


def _usage(usage: Any) -> str:
    if not isinstance(usage, dict):
        return ""
    return f"{usage.get('input_tokens', 0)} in / {usage.get('output_tokens', 0)} out tokens"


def _token(text: str) -> str:
    """A class name from untrusted text: letters and underscores only."""
    return "".join(ch for ch in text if ch.isalnum() or ch == "_")[:30] or "unknown"


def _message(event: EventView, logged_calls: set[str]) -> Item:
    payload = event.payload
    role = str(payload.get("role", "?"))
    details = [
        str(part)
        for part in (payload.get("model"), payload.get("stop_reason"), _usage(payload.get("usage")))
        if part
    ]
    calls = tuple(
        # A call with its own tool_call event is named here, its arguments shown there.
        Call(c.get("name"), None if c.get("id") in logged_calls else _json(c.get("arguments")))
        for c in payload.get("tool_calls") or []
        if isinstance(c, dict)
    )
    return Item(
        kind="message",
        cls=f"message role-{_token(role)}",
        seq=event.seq,
        type=_token(event.type),
        label=role,
        details=" · ".join(details),
        content=payload.get("content") or None,
        calls=calls,
    )


def item(event: EventView, logged_calls: set[str]) -> Item:
    payload = event.payload
    common: dict[str, Any] = {"seq": event.seq, "type": _token(event.type)}
    if event.type == "message":
        return _message(event, logged_calls)
    if event.type == "tool_call":
        return Item(
            kind="tool_call",
            cls="tool_call",
            label="tool call",
            name=payload.get("name"),
            json=_json(payload.get("arguments")),
            **common,
        )
    if event.type == "tool_result":
        error = payload.get("error")
        return Item(
            kind="tool_result",
            cls="tool_result failed" if error else "tool_result",
            label="result",
            name=payload.get("name"),
            error=error,
            content=payload.get("content", ""),
            **common,
        )
    if event.type == "lifecycle":
        return Item(
            kind="lifecycle",
            cls="lifecycle",
            label=payload.get("step"),
            detail=payload.get("detail", ""),
            **common,
        )
    return Item(kind="other", cls="other", label=event.type, json=_json(payload), **common)


def items(events: Sequence[EventView]) -> list[Item]:
    logged_calls = {
        str(e.payload.get("id")) for e in events if e.type == "tool_call" and e.payload.get("id")
    }
    return [item(e, logged_calls) for e in events]


def transcript(events: Sequence[EventView]) -> str:
    """The transcript alone, as the trial page includes it."""
    return render("_transcript.html", items=items(events))
