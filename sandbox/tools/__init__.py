"""The tools an agent may call, by name.

The file tools are on by default; `bash` is opt-in per case or run, since a shell can do
far more than the file tools and most cases do not need it.
"""

from __future__ import annotations

from collections.abc import Sequence

from sandbox.tools.base import Tool
from sandbox.tools.bash import BASH
from sandbox.tools.files import EDIT, FIND, GREP, LS, READ, WRITE

TOOLS: dict[str, Tool] = {tool.name: tool for tool in (READ, WRITE, EDIT, LS, FIND, GREP, BASH)}
DEFAULT_TOOLS: tuple[str, ...] = ("read", "write", "edit", "ls", "find", "grep")
OPTIONAL_TOOLS: tuple[str, ...] = ("bash",)

__all__ = ["DEFAULT_TOOLS", "OPTIONAL_TOOLS", "TOOLS", "select_tools"]


def select_tools(names: Sequence[str]) -> list[Tool]:
    """The tools called `names`, in that order; a name given twice is kept once, since
    model APIs reject duplicate tool names. ValueError for a name that is no tool."""
    selected: list[Tool] = []
    for name in names:
        tool = TOOLS.get(name)
        if tool is None:
            known = ", ".join(TOOLS)
            raise ValueError(f"Unknown tool {name!r}; known tools: {known}.")
        if tool not in selected:
            selected.append(tool)
    return selected
