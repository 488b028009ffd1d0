"""How a suite defines its cases: the authoring API that modules under `evals/` import.

A suite is a Python module with a `CASES` list. It is imported only inside the exam hall,
as root, before the agent starts; the control plane never imports it.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from sandbox.caps import JUDGE_READ, CapExceeded
from sandbox.conversation import AssistantTurn, ModelRequest
from sandbox.faux import FauxStep
from sandbox.protocol import Event, ToolResultEvent


class ModelClient(Protocol):
    def complete(self, request: ModelRequest) -> AssistantTurn: ...


class JudgeModelError(Exception):
    """The judge model gave no answer (provider error, budget, transport): judge_error.

    Here rather than in `graded`, its client's module, so that the worker can catch it
    without importing the client at every trial's start."""


@dataclass(frozen=True)
class AgentRun:
    """What a judge sees: the final answer, the transcript and the live workspace."""

    final_text: str
    workspace: Path
    events: tuple[Event, ...]
    # The most read_file reads; the agent decides how large its files are.
    read_limit: int = 16 * 1024 * 1024
    # The job's judge model (sandbox.graded), reached through the control plane; None when
    # the job names none.
    judge_model: ModelClient | None = None

    def read_file(self, path: str) -> str | None:
        """A workspace file's text as it is now, or None when it is missing, escapes or is
        not a regular file. A file over `read_limit` bytes raises CapExceeded, which fails
        the trial (limit_exceeded) rather than exhaust the judge's memory."""
        root = self.workspace.resolve()
        target = (root / path).resolve()
        if root not in target.parents or not target.is_file():
            return None
        with target.open("rb") as handle:
            data = handle.read(self.read_limit + 1)
        if len(data) > self.read_limit:
            raise CapExceeded(
                JUDGE_READ,
                f"The agent left {path} larger than the {self.read_limit} bytes a judge reads.",
            )
        return data.decode(errors="replace")

    def tool_results(self, name: str | None = None) -> list[ToolResultEvent]:
        return [
            e
            for e in self.events
            if isinstance(e, ToolResultEvent) and (name is None or e.name == name)
        ]


JudgeResult = bool | float | tuple[float, str]


@dataclass(frozen=True)
class Judge:
    """A named check of an agent's run that scores it in [0, 1]."""

    name: str
    fn: Callable[[AgentRun], JudgeResult]
    # A model-graded judge's rubric, by its hash: the report's record names it.
    rubric_sha256: str | None = None

    def score(self, run: AgentRun) -> tuple[float, str]:
        """The judge's score in [0, 1] and its detail; ValueError when it broke that rule."""
        result = self.fn(run)
        detail = ""
        if isinstance(result, tuple):
            result, detail = result
        value = float(result)
        if not math.isfinite(value) or not 0.0 <= value <= 1.0:
            raise ValueError(
                f"Judge {self.name} returned {result!r}; a judge returns a number in [0, 1]."
            )
        return value, detail


def judge(fn: Callable[[AgentRun], JudgeResult]) -> Judge:
    """Decorator: a function of the run becomes a judge named after it."""
    return Judge(name=fn.__name__, fn=fn)


@dataclass(frozen=True)
class Weighted:
    """A case's rule for combining its judges: the weighted mean of their scores, passing at
    `threshold`. Judges not named in `weights` weigh 1. Without it a case passes only when
    every judge scores 1 (the mean is 1)."""

    threshold: float
    weights: Mapping[str, float] = field(default_factory=dict)

    def check(self, case_id: str, judge_names: Sequence[str]) -> None:
        if isinstance(self.threshold, bool) or not isinstance(self.threshold, int | float):
            raise ValueError(f"Case {case_id}'s threshold must be a number in (0, 1].")
        if not (math.isfinite(self.threshold) and 0.0 < self.threshold <= 1.0):
            raise ValueError(
                f"Case {case_id}'s threshold is {self.threshold!r}; give a number in (0, 1]."
            )
        duplicated = sorted({n for n in judge_names if judge_names.count(n) > 1})
        if duplicated:
            raise ValueError(
                f"Case {case_id} weighs its judges by name, and {duplicated} name more than "
                "one judge; give each judge its own name (name=...)."
            )
        for judge_name, weight in self.weights.items():
            if judge_name not in judge_names:
                raise ValueError(
                    f"Case {case_id} weighs {judge_name!r}, which is not one of its judges "
                    f"({', '.join(judge_names)})."
                )
            if (
                isinstance(weight, bool)
                or not isinstance(weight, int | float)
                or not (math.isfinite(weight) and weight > 0)
            ):
                raise ValueError(
                    f"Case {case_id} weighs {judge_name!r} {weight!r}; a weight is a positive "
                    "number."
                )

    def weight(self, judge_name: str) -> float:
        return float(self.weights.get(judge_name, 1.0))


def combine(scores: Sequence[tuple[str, float]], rule: Weighted | None) -> tuple[float, bool]:
    """The trial's score and whether it passed, from its judges' (name, score)."""
    if rule is None:
        score = math.fsum(value for _, value in scores) / len(scores)
        return score, score >= 1.0
    total = math.fsum(rule.weight(n) for n, _ in scores)
    score = min(1.0, math.fsum(rule.weight(n) * value for n, value in scores) / total)
    # Every judge at 1 is a score of 1, whatever rounding the weights bring.
    if all(value >= 1.0 for _, value in scores):
        score = 1.0
    return score, score >= rule.threshold or math.isclose(score, rule.threshold)


@dataclass(frozen=True)
class Environment:
    """The image a case runs in instead of the bare sandbox: Debian packages, pinned pip
    requirements, files under the working directory and variables (a declarative spec), or
    a Dockerfile with its build context. The control plane builds it once, by the content
    hash of all of it, and layers examhall's worker onto it; a suite's `ENVIRONMENT` is the
    default of its cases."""

    apt: Sequence[str] = ()
    pip: Sequence[str] = ()
    files: Mapping[str, str] = field(default_factory=dict)
    env: Mapping[str, str] = field(default_factory=dict)
    workdir: str | None = None
    base: str | None = None
    # Instead of the fields above: a Dockerfile, and the text files of its build context.
    dockerfile: str | None = None
    context: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        declarative = self.apt or self.pip or self.files or self.env or self.workdir or self.base
        if self.dockerfile is not None and declarative:
            raise ValueError(
                "An Environment is a dockerfile (with its context) or a declarative spec "
                "(apt, pip, files, env, workdir, base), not both."
            )
        if self.context and self.dockerfile is None:
            raise ValueError("An Environment's context is the dockerfile's; give a dockerfile.")

    def describe(self) -> dict[str, Any]:
        """The spec as plain data, for the control plane (which validates it again)."""
        if self.dockerfile is not None:
            return {"dockerfile": self.dockerfile, "context": dict(self.context)}
        described: dict[str, Any] = {
            "apt": list(self.apt),
            "pip": list(self.pip),
            "files": dict(self.files),
            "env": dict(self.env),
        }
        if self.workdir is not None:
            described["workdir"] = self.workdir
        if self.base is not None:
            described["base"] = self.base
        return described


@dataclass(frozen=True)
class Case:
    """One task of a suite: its input, files, judges and tools."""

    id: str
    # A prompt, or a list of prompts sent one after another as steps.
    input: str | Sequence[str]
    judges: Sequence[Judge]
    files: Mapping[str, str | bytes] = field(default_factory=dict)
    metadata: Mapping[str, Any] = field(default_factory=dict)
    # Tools this case needs; None means the default file tools.
    tools: Sequence[str] | None = None
    # Faux scripts by name: `faux/NAME` plays one; the simulated model replays "solution".
    scripts: Mapping[str, Sequence[FauxStep]] = field(default_factory=dict)
    # The image this case runs in; None: the suite's ENVIRONMENT, else the bare sandbox.
    environment: Environment | None = None
    # How the judges' scores combine: None, every judge must score 1; or a weighted mean
    # with a threshold.
    scoring: Weighted | None = None

    def __post_init__(self) -> None:
        if self.environment is not None and not isinstance(self.environment, Environment):
            raise ValueError(f"Case {self.id}'s environment is not a sandbox.suite.Environment.")
        if not isinstance(self.id, str) or not self.id.strip():
            raise ValueError("A case needs a non-empty string id.")
        if not self.judges:
            raise ValueError(f"Case {self.id} has no judges; give it at least one.")
        for item in self.judges:
            if not isinstance(item, Judge):
                raise ValueError(
                    f"Case {self.id} has a judge that is not a Judge ({item!r}); "
                    "wrap functions with @judge or use sandbox.judges."
                )
        if not self.prompts:
            raise ValueError(f"Case {self.id} has an empty input; give a prompt or steps.")
        if self.scoring is not None:
            if not isinstance(self.scoring, Weighted):
                raise ValueError(f"Case {self.id}'s scoring is not a sandbox.suite.Weighted.")
            self.scoring.check(self.id, [j.name for j in self.judges])

    @property
    def prompts(self) -> list[str]:
        return [self.input] if isinstance(self.input, str) else list(self.input)


def find_case(cases: Sequence[Case], case_id: str) -> Case:
    for case in cases:
        if case.id == case_id:
            return case
    known = ", ".join(c.id for c in cases) or "none"
    raise LookupError(f"Case {case_id!r} is not in this suite; its cases: {known}.")


def cases_of(module: object) -> list[Case]:
    """The module's CASES, checked: a list of Case with unique ids, each with its
    environment (its own, else the module's ENVIRONMENT)."""
    cases = getattr(module, "CASES", None)
    if not isinstance(cases, list | tuple) or not all(isinstance(c, Case) for c in cases):
        raise ValueError("A suite must define CASES, a list of sandbox.suite.Case.")
    default = getattr(module, "ENVIRONMENT", None)
    if default is not None and not isinstance(default, Environment):
        raise ValueError("A suite's ENVIRONMENT must be a sandbox.suite.Environment.")
    if default is not None:
        cases = [c if c.environment else dataclasses.replace(c, environment=default) for c in cases]
    seen: set[str] = set()
    for case in cases:
        if case.id in seen:
            raise ValueError(f"Case id {case.id!r} appears twice; case ids must be unique.")
        seen.add(case.id)
    return list(cases)
