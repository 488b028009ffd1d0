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
from typing import Any

from sandbox.caps import JUDGE_READ, CapExceeded
from sandbox.faux import FauxStep
from sandbox.protocol import Event, ToolResultEvent


@dataclass(frozen=True)
class AgentRun:
    """What a judge sees: the final answer, the transcript and the live workspace."""

    final_text: str
    workspace: Path
    events: tuple[Event, ...]
    # The most read_file reads; the agent decides how large its files are.
    read_limit: int = 16 * 1024 * 1024

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
    name: str
    fn: Callable[[AgentRun], JudgeResult]

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
