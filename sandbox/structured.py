"""Structured judges: a function of the run returns named facts, each compared with its
expected value (an exact value, a regex or a predicate; see sandbox.matchers).

Facts are read fresh after the agent stopped, from the workspace or from the final answer:

    def ledger_facts(run: AgentRun) -> dict[str, Any]:
        data = file_json(run, "ledger.json")
        return {"total": data["total"], "currency": data["currency"]}

    judges=[facts_match(ledger_facts, {"total": 42, "currency": "EUR"})]

A fact function that raises on what the agent left (no such file, JSON that does not parse,
a missing key) fails the trial naming the judge, as every judge that raises does: never an
unscored trial.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any

from sandbox.matchers import describe, mismatch
from sandbox.suite import AgentRun, Judge

Facts = Callable[[AgentRun], Mapping[str, Any]]

_FENCED = re.compile(r"```(?:json)?[ \t]*\n(.*?)```", re.DOTALL)


class FactError(ValueError):
    """What the agent left holds no such fact; the message says what was wrong."""


def parse_json(text: str, where: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as exc:
        raise FactError(f"{where} is not JSON ({exc}).") from None


def answer_json(run: AgentRun) -> Any:
    """JSON from the final answer: the whole answer, else its last fenced block (```json),
    else its outermost {...}."""
    text = run.final_text.strip()
    try:
        return json.loads(text)
    except ValueError:
        pass
    if blocks := _FENCED.findall(text):
        return parse_json(blocks[-1], "The final answer's last fenced block")
    start, end = text.find("{"), text.rfind("}")
    if 0 <= start < end:
        return parse_json(text[start : end + 1], "The final answer's {...}")
    raise FactError("The final answer holds no JSON: neither whole, fenced, nor an {...}.")


def file_json(run: AgentRun, path: str) -> Any:
    """A workspace file's JSON, read now (within the judges' read cap)."""
    text = run.read_file(path)
    if text is None:
        raise FactError(f"{path} does not exist in the workspace (or is not a regular file).")
    return parse_json(text, path)


def facts_match(facts: Facts, expected: Mapping[str, Any], *, name: str | None = None) -> Judge:
    """Scores the share of expected facts that match (1 when all do); the detail lists each
    one that differs, expected against actual, or a fact the function did not return."""
    if not expected:
        raise ValueError("facts_match needs at least one expected fact.")

    def check(run: AgentRun) -> tuple[float, str]:
        actual = facts(run)
        if not isinstance(actual, Mapping):
            raise FactError(
                f"The fact function returned {type(actual).__name__}, not a mapping of names "
                "to facts."
            )
        differs = []
        for key, want in expected.items():
            if key not in actual:
                differs.append(f"{key}: expected {describe(want)}, missing")
            elif (why := mismatch(want, actual[key])) is not None:
                differs.append(f"{key}: {why}")
        matched = len(expected) - len(differs)
        if not differs:
            return 1.0, f"all {len(expected)} facts match"
        return matched / len(expected), f"{len(differs)} of {len(expected)} differ: " + "; ".join(
            differs
        )

    label = getattr(facts, "__name__", "facts")
    return Judge(name=name or f"facts_match({label})", fn=check)


def answer_json_matches(expected: Mapping[str, Any], *, name: str | None = None) -> Judge:
    """The final answer's JSON object, its top-level keys as the facts."""

    def answer_facts(run: AgentRun) -> Mapping[str, Any]:
        data = answer_json(run)
        if not isinstance(data, dict):
            raise FactError(f"The final answer's JSON is a {type(data).__name__}, not an object.")
        return data

    return facts_match(answer_facts, expected, name=name or "answer_json")


def file_json_matches(path: str, expected: Mapping[str, Any], *, name: str | None = None) -> Judge:
    """A workspace JSON file's object, its top-level keys as the facts."""

    def file_facts(run: AgentRun) -> Mapping[str, Any]:
        data = file_json(run, path)
        if not isinstance(data, dict):
            raise FactError(f"{path} holds a JSON {type(data).__name__}, not an object.")
        return data

    return facts_match(file_facts, expected, name=name or f"file_json({path})")
