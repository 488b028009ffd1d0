"""What a suite imports: `from examhall.suite import Case, judges, ...`.

The one place suite authors import from. It re-exports the sandbox's standard-library-only
authoring modules as they are (cases, environments, judges of every kind, matchers and the
faux models' scripts), so a suite runs wherever `sandbox` does: inside the exam hall, where
nothing else is installed. This module imports `sandbox` only (tests/unit/test_layering.py)."""

from __future__ import annotations

from sandbox import faux, graded, judges, matchers, structured, trace_judges
from sandbox.conversation import ModelRequest, ToolResultMessage
from sandbox.graded import model_graded
from sandbox.judges import file_absent, file_contains, file_equals, final_text_contains
from sandbox.matchers import regex, satisfies
from sandbox.protocol import Event, ToolCallEvent, ToolResultEvent
from sandbox.structured import (
    FactError,
    answer_json,
    answer_json_matches,
    facts_match,
    file_json,
    file_json_matches,
)
from sandbox.suite import AgentRun, Case, Environment, Judge, JudgeResult, Weighted, judge
from sandbox.trace_judges import (
    CallSpec,
    call,
    no_tool_errors,
    tool_call_count,
    tool_called,
    tool_sequence,
)

__all__ = [
    "AgentRun",
    "CallSpec",
    "Case",
    "Environment",
    "Event",
    "FactError",
    "Judge",
    "JudgeResult",
    "ModelRequest",
    "ToolCallEvent",
    "ToolResultEvent",
    "ToolResultMessage",
    "Weighted",
    "answer_json",
    "answer_json_matches",
    "call",
    "facts_match",
    "faux",
    "file_absent",
    "file_contains",
    "file_equals",
    "file_json",
    "file_json_matches",
    "final_text_contains",
    "graded",
    "judge",
    "judges",
    "matchers",
    "model_graded",
    "no_tool_errors",
    "regex",
    "satisfies",
    "structured",
    "tool_call_count",
    "tool_called",
    "tool_sequence",
    "trace_judges",
]
