"""A trial's transcript as a list: messages, tool calls and their results, worker steps.

The payloads are the stored events (sandbox/protocol.py's dataclasses as dicts). They came
out of the container, so every field is rendered as text and unknown shapes are shown raw
rather than trusted.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from service.api.schemas import EventView
from service.web.markup import esc


def _json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True)


def _call(name: Any, arguments: Any) -> str:
    return (
        f'<span class="tool-name">{esc(name)}</span>'
        f'<pre class="arguments">{esc(_json(arguments))}</pre>'
    )


def _usage(usage: Any) -> str:
    if not isinstance(usage, dict):
        return ""
    return f"{usage.get('input_tokens', 0)} in / {usage.get('output_tokens', 0)} out tokens"


def _message(payload: dict[str, Any], logged_calls: set[str]) -> tuple[str, str]:
    role = str(payload.get("role", "?"))
    details = [
        str(part)
        for part in (payload.get("model"), payload.get("stop_reason"), _usage(payload.get("usage")))
        if part
    ]
    body = f'<span class="kind">{esc(role)}</span>'
    if details:
        body += f'<span class="muted">{esc(" · ".join(details))}</span>'
    if payload.get("content"):
        body += f'<pre class="content">{esc(payload["content"])}</pre>'
    calls = [c for c in payload.get("tool_calls") or [] if isinstance(c, dict)]
    if calls:
        items = []
        for c in calls:
            if c.get("id") in logged_calls:
                # Its own tool_call event follows with the arguments; name it only once here.
                items.append(
                    f'<li>asks for <span class="tool-name">{esc(c.get("name"))}</span></li>'
                )
            else:
                items.append(f"<li>asks for {_call(c.get('name'), c.get('arguments'))}</li>")
        body += '<ul class="tool-calls">' + "".join(items) + "</ul>"
    return f"message role-{_token(role)}", body


def _tool_result(payload: dict[str, Any]) -> tuple[str, str]:
    error = payload.get("error")
    body = (
        f'<span class="kind">result</span><span class="tool-name">{esc(payload.get("name"))}</span>'
    )
    if error:
        body += f' <span class="error-text">error: {esc(error)}</span>'
    body += f'<pre class="content">{esc(payload.get("content", ""))}</pre>'
    return "tool_result failed" if error else "tool_result", body


def _token(text: str) -> str:
    """A class name from untrusted text: letters and underscores only."""
    return "".join(ch for ch in text if ch.isalnum() or ch == "_")[:30] or "unknown"


def event_item(event: EventView, logged_calls: set[str]) -> str:
    payload = event.payload
    if event.type == "message":
        cls, body = _message(payload, logged_calls)
    elif event.type == "tool_call":
        cls = "tool_call"
        body = '<span class="kind">tool call</span>' + _call(
            payload.get("name"), payload.get("arguments")
        )
    elif event.type == "tool_result":
        cls, body = _tool_result(payload)
    elif event.type == "lifecycle":
        cls = "lifecycle"
        body = (
            f'<span class="kind">{esc(payload.get("step"))}</span>{esc(payload.get("detail", ""))}'
        )
    else:
        cls = "other"
        body = f'<span class="kind">{esc(event.type)}</span><pre>{esc(_json(payload))}</pre>'
    return f'<li class="{cls}" data-seq="{event.seq}" data-type="{_token(event.type)}">{body}</li>'


def transcript(events: Sequence[EventView]) -> str:
    if not events:
        return '<p class="muted">No events recorded.</p>'
    logged_calls = {
        str(e.payload.get("id")) for e in events if e.type == "tool_call" and e.payload.get("id")
    }
    items = "".join(event_item(e, logged_calls) for e in events)
    return f'<ol class="transcript">{items}</ol>'
