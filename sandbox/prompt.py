"""The agent's system prompt: a <rules> section, and a <docs> section when the variant has docs.

The with_docs and without_docs arms of a docs-lift comparison differ in the <docs> section
and nothing else; the worker checks that before the agent starts, so a harness bug cannot
quietly turn a comparison into two runs of the same arm.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from sandbox import digests

RULES = """You are an agent working on one task in the directory /workspace.
Use the tools to inspect and change files there; paths are relative to /workspace.
When the task is done, reply with a short summary of what you did."""


class PromptMismatch(ValueError):
    pass


def docs_section(docs: Mapping[str, str]) -> str:
    parts = [f'<doc name="{name}">\n{docs[name].rstrip()}\n</doc>' for name in sorted(docs)]
    return "<docs>\n" + "\n".join(parts) + "\n</docs>"


def build_system_prompt(
    tool_names: Sequence[str],
    *,
    docs: Mapping[str, str] | None = None,
    rules: str | None = None,
) -> str:
    tools = ", ".join(tool_names) or "none"
    prompt = f"<rules>\n{(rules or RULES).rstrip()}\nTools available: {tools}.\n</rules>"
    if docs is not None:
        prompt += "\n\n" + docs_section(docs)
    return prompt


_SECTION_LINE = re.compile(r"^</?(rules|docs)>$|^</?doc(\s.*)?>$", re.MULTILINE)


def section_marker(text: str) -> str | None:
    """A line of `text` that would read as a section boundary of the prompt, if any."""
    match = _SECTION_LINE.search(text)
    return match.group(0) if match else None


def verify_prompt(prompt: str, *, variant: str, has_docs: bool) -> None:
    """<rules> exactly once; <docs> exactly once when the variant has docs, else never."""
    rules = len(re.findall(r"^<rules>$", prompt, re.MULTILINE))
    docs = len(re.findall(r"^<docs>$", prompt, re.MULTILINE))
    if rules != 1 or docs != (1 if has_docs else 0):
        raise PromptMismatch(f"System prompt does not match the {variant} variant.")


def prompt_sha256(prompt: str) -> str:
    return digests.sha256(prompt.encode()).hexdigest()
