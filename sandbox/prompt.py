"""The agent's system prompt."""

from __future__ import annotations

from collections.abc import Sequence

RULES = """You are an agent working on one task in the directory /workspace.
Use the tools to inspect and change files there; paths are relative to /workspace.
When the task is done, reply with a short summary of what you did."""


def build_system_prompt(tool_names: Sequence[str]) -> str:
    tools = ", ".join(tool_names) or "none"
    return f"<rules>\n{RULES}\nTools available: {tools}.\n</rules>"
