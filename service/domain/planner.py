"""Turning a job request into a design and an ordered plan of trials, checked against the
box's limits, its suites and its providers. Storing them is service/store/jobs.py's."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from sandbox.protocol import CaseInfo
from service.domain.agents import AgentEnvironment
from service.domain.docs_sets import DocsSetError, load_docs
from service.domain.job_spec import (
    BOOTSTRAP_VERSION,
    Harness,
    JobRequest,
    JobSpec,
    ModelSpec,
    VariantSpec,
)
from service.providers import ProviderRegistry, default_model

DEFAULT_VARIANT = "default"


class JobInputError(ValueError):
    """Bad input that names its field; nothing was written."""

    def __init__(self, loc: tuple[str | int, ...], message: str) -> None:
        super().__init__(message)
        self.loc = loc
        self.message = message


@dataclass(frozen=True)
class PlannedTrial:
    case_id: str
    variant: str
    round: int
    order: int


def plan(
    cases: list[str], rounds: int, arms: tuple[str, ...] = (DEFAULT_VARIANT,)
) -> list[PlannedTrial]:
    """Round by round, so a job stopped early still covers every case evenly; within a
    (case, round) every arm runs back to back, the baseline first in odd rounds and last
    in even ones, so drift over the job cannot favour one arm (as pi-evals does)."""
    return [PlannedTrial(*trial) for trial in plan_tuples(cases, rounds, arms)]


def plan_tuples(
    cases: Sequence[str], rounds: int, arms: tuple[str, ...] = (DEFAULT_VARIANT,)
) -> Iterator[tuple[str, str, int, int]]:
    """`plan` as (case_id, variant, round, order), without an object per trial: what a
    job of 100,000 trials is stored from."""
    order = 0
    backwards = tuple(reversed(arms))
    for round_ in range(1, rounds + 1):
        variants = arms if round_ % 2 else backwards
        for case_id in cases:
            for variant in variants:
                yield case_id, variant, round_, order
                order += 1


def first_cases_orders(cases: int, arms: int, rounds: int, first: int) -> list[int]:
    """The plan orders of every trial of the first `first` of `cases` cases (as `plan`
    numbers them), without planning the job: each round's trials of those cases are the
    start of that round's block."""
    per_round = cases * arms
    shown = min(first, cases) * arms
    return [
        order
        for start in range(0, rounds * per_round, per_round)
        for order in range(start, start + shown)
    ]


@dataclass(frozen=True)
class Design:
    """The variants of a job, resolved: each a harness with its model and limits."""

    variants: dict[str, VariantSpec]
    baseline: str | None
    # Baseline first, then candidates in the order given.
    arms: tuple[str, ...]
    docs: dict[str, str] | None
    docs_name: str | None
    cases: tuple[str, ...] = ()
    # The environments of the cases that declare one (sandbox.suite.Environment.describe()).
    environments: Mapping[str, dict[str, Any]] = field(default_factory=dict)
    # The tasks that ask for a network (Harbor's network_mode), and what they ask for.
    networks: Mapping[str, str] = field(default_factory=dict)

    @property
    def builds(self) -> bool:
        """Whether images must be built before the trials run (case environments, or
        agents to install)."""
        return bool(self.environments) or any(
            isinstance(v.agent, dict) for v in self.variants.values()
        )


# The provider that names a built-in agent (oracle, nop) where a variant's model would be.
BUILTIN_PROVIDER = "agent"


def _box_default() -> ModelSpec | None:
    try:
        default = default_model()
    except ValueError as exc:
        raise JobInputError(("body", "model"), str(exc)) from None
    return ModelSpec(provider=default[0], id=default[1]) if default else None


def resolve_design(request: JobRequest, cases: Sequence[str] = ()) -> Design:
    variants = request.variants
    baseline = request.baseline
    if request.comparison == "docs-lift":
        if variants is not None:
            raise JobInputError(
                ("body", "variants"), 'Give either comparison "docs-lift" or variants, not both.'
            )
        if request.docs is None:
            raise JobInputError(
                ("body", "docs"), "The docs-lift comparison needs a docs bundle or docs set name."
            )
        if baseline not in (None, "without_docs"):
            raise JobInputError(
                ("body", "baseline"), "In a docs-lift comparison the baseline is without_docs."
            )
        variants = {"without_docs": Harness(), "with_docs": Harness(docs=True)}
        baseline = "without_docs"
    elif variants is None:
        variants = {DEFAULT_VARIANT: Harness()}
    if len(variants) > 1 and baseline is None:
        raise JobInputError(
            ("body", "baseline"),
            f"With {len(variants)} variants, baseline must name the one the others are "
            f"compared to: one of {', '.join(variants)}.",
        )
    if baseline is not None and baseline not in variants:
        raise JobInputError(
            ("body", "baseline"),
            f"baseline {baseline!r} is not a variant; variants: {', '.join(variants)}.",
        )
    docs_name = request.docs if isinstance(request.docs, str) else None
    docs: dict[str, str] | None = None
    if request.docs is not None:
        if isinstance(request.docs, str):
            try:
                docs = load_docs(request.docs)
            except DocsSetError as exc:
                raise JobInputError(("body", "docs"), str(exc)) from None
        else:
            docs = request.docs.files
    resolved: dict[str, VariantSpec] = {}
    for name, harness in variants.items():
        builtin = harness.agent if isinstance(harness.agent, str) else None
        installed = harness.agent if isinstance(harness.agent, AgentEnvironment) else None
        # A built-in agent has no model; its "model" names it in reports.
        model = (
            ModelSpec(provider=BUILTIN_PROVIDER, id=builtin)
            if builtin
            else harness.model or request.model or _box_default()
        )
        if model is None:
            raise JobInputError(
                ("body", "model"),
                "model is required unless every variant names its own model or the box sets "
                "EXAMHALL_DEFAULT_PROVIDER and EXAMHALL_DEFAULT_MODEL.",
            )
        if harness.docs and docs is None:
            raise JobInputError(
                ("body", "variants", name, "docs"),
                f"Variant {name} wants docs, but the job has no docs bundle; add docs.",
            )
        resolved[name] = VariantSpec(
            model=model,
            tools=harness.tools,
            docs=harness.docs,
            rules=harness.rules,
            command=list(installed.argv()) if installed else harness.command,
            agent=installed.model_dump() if installed else builtin,
            limits=harness.limits or request.limits,
        )
    arms = ((baseline,) if baseline else ()) + tuple(v for v in variants if v != baseline)
    return Design(resolved, baseline, arms, docs, docs_name, tuple(cases))


def refused_task(suite: str, task: str, problems: Sequence[str]) -> str:
    return (
        f"Suite {suite}'s task {task} was refused when it was uploaded: {'; '.join(problems)}. "
        "Fix it and upload the suite again, or leave it out of the job's cases."
    )


def select_cases(
    request: JobRequest,
    known: list[str],
    suite: str,
    refused: Mapping[str, Sequence[str]] | None = None,
) -> list[str]:
    """The job's cases among the suite's `known` ones; `refused` are the suite's tasks that
    did not load (named as such, not as unknown)."""
    if not known:
        raise JobInputError(("body", "suite"), f"Suite {suite} defines no cases.")
    if request.cases is None:
        return known
    for index, case_id in enumerate(request.cases):
        if refused and case_id in refused:
            raise JobInputError(
                ("body", "cases", index), refused_task(suite, case_id, refused[case_id])
            )
        if case_id not in known:
            raise JobInputError(
                ("body", "cases", index),
                f"Unknown case {case_id!r} in suite {suite}; its cases: {', '.join(known)}.",
            )
    return list(request.cases)


class SuiteTraits(Protocol):
    """What the checks below ask of a suite's format (service/suites/base.py SuiteFormat)."""

    @property
    def builtin_agents(self) -> bool:
        """The built-in agents run on its suites: their cases have solutions to run."""
        ...

    @property
    def builds_environments(self) -> bool:
        """Every job of it runs in images built for it."""
        ...


def check_agents(request: JobRequest, suite_format: SuiteTraits) -> None:
    """The built-in agents check tasks (a Python suite's cases have no solution to run) and
    call no model; an installed agent brings its own command."""
    suite = request.suite if isinstance(request.suite, str) else request.suite.name
    for name, harness in (request.variants or {}).items():
        where = ("body", "variants", name, "agent")
        if isinstance(harness.agent, str):
            if not suite_format.builtin_agents:
                raise JobInputError(
                    where,
                    f"The {harness.agent} agent runs on task suites (Harbor's format) only; "
                    f"suite {suite} is a Python suite.",
                )
            if harness.model or harness.command:
                raise JobInputError(
                    where,
                    f"Variant {name} names the built-in {harness.agent} agent and a model or "
                    "command; give one of them.",
                )
        elif harness.agent is not None and harness.command:
            raise JobInputError(
                where,
                f"Variant {name} installs an agent and names a command; the agent's command "
                "is the one its install gives (agent.command for pip agents).",
            )


def check_credentials(request: JobRequest, design: Design, suite_format: SuiteTraits) -> None:
    """Direct credentials put the provider's key in the sandbox's root supervisor; in an
    image a suite built (its Python, its libc, its site-packages) that process would run the
    suite's code. Such jobs reach their models through the relay only."""
    if request.credentials == "direct" and (suite_format.builds_environments or design.builds):
        raise JobInputError(
            ("body", "credentials"),
            "Direct credentials are for jobs that run in examhall's own sandbox image; this "
            "job runs in images a suite builds (a task suite, case environments, or installed "
            'agents), so its models are reached through the relay: use "relay".',
        )


def check_variant_count(request: JobRequest, max_variants: int) -> None:
    """Checked before the suite is listed: a job with too many variants needs no container."""
    count = len(request.variants or {})
    if count > max_variants:
        raise JobInputError(
            ("body", "variants"),
            f"The job names {count} variants; this box allows at most {max_variants} per job "
            "(EXAMHALL_MAX_VARIANTS). Split it into several jobs.",
        )


def check_plan_size(request: JobRequest, design: Design, max_planned: int) -> None:
    """Every read of a job scans its trials, so one request may not plan without bound."""
    planned = len(design.cases) * len(design.arms) * request.rounds
    if planned > max_planned:
        raise JobInputError(
            ("body", "rounds"),
            f"The job plans {planned} trials ({len(design.cases)} cases x {len(design.arms)} "
            f"variants x {request.rounds} rounds); this box allows at most {max_planned} per "
            "job (EXAMHALL_MAX_PLANNED_TRIALS). Ask for fewer rounds, cases or variants.",
        )


def check_models(
    request: JobRequest,
    design: Design,
    infos: Sequence[CaseInfo],
    registry: ProviderRegistry,
) -> None:
    """Refuse a model that could only fail every trial: better a 422 now than a confident
    0% later."""
    scripts = {info.id: info.scripts for info in infos if info.id in design.cases}
    for name, harness in design.variants.items():
        if isinstance(harness.agent, str):
            continue  # a built-in agent calls no model
        own = request.variants is not None and request.variants[name].model is not None
        base: tuple[str | int, ...] = (
            ("body", "variants", name, "model") if own else ("body", "model")
        )
        problem = registry.model_problem(harness.model.provider, harness.model.id, scripts)
        if problem is not None:
            field, message = problem
            raise JobInputError((*base, field), message)
    judge = request.judge_model
    if judge is not None and (problem := registry.judge_model_problem(judge.provider, judge.id)):
        field, message = problem
        raise JobInputError(("body", "judge_model", field), message)


def job_spec(request: JobRequest, design: Design) -> JobSpec:
    """What the job's row keeps: the request's settings with the design resolved."""
    docs_sha = (
        hashlib.sha256(json.dumps(design.docs, sort_keys=True).encode()).hexdigest()
        if design.docs is not None
        else None
    )
    return JobSpec(
        **request.model_dump(exclude={"suite", "docs", "variants", "cases", "baseline"}),
        cases=list(design.cases),
        variants=design.variants,
        baseline=design.baseline,
        arms=list(design.arms),
        docs=design.docs,
        docs_name=design.docs_name,
        docs_sha256=docs_sha,
        environments=dict(design.environments) or None,
        networks=dict(design.networks) or None,
        bootstrap=BOOTSTRAP_VERSION,
    )
