"""A faux script played through the real agent loop and file tools on a workspace: the run
the judges of the in-process suite tests read, as the worker would hand it to them."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from sandbox.agent import AgentState, run_agent
from sandbox.faux import FauxModel, FauxStep
from sandbox.protocol import Event
from sandbox.suite import AgentRun, ModelClient
from sandbox.tools import DEFAULT_TOOLS, select_tools
from sandbox.tools.base import ToolContext


def play(
    script: Sequence[FauxStep],
    workspace: Path,
    *,
    system: str,
    prompts: Sequence[str],
    tools: Sequence[str] | None = None,
    judge_model: ModelClient | None = None,
) -> AgentRun:
    events: list[Event] = []
    state = AgentState()
    run_agent(
        FauxModel(list(script)),
        system=system,
        prompts=prompts,
        tools=select_tools(tools or DEFAULT_TOOLS),
        ctx=ToolContext(
            workspace=workspace,
            timeout_s=10.0,
            output_limit=100_000,
            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
        ),
        max_turns=20,
        emit=events.append,
        state=state,
    )
    return AgentRun(state.final_text, workspace, tuple(events), judge_model=judge_model)
