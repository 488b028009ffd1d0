"""Turning a job request into stored, ordered trials."""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy.orm import Session

from sandbox.prompt import section_marker
from sandbox.protocol import CaseInfo, SuiteBundle
from service import __version__
from service.domain.job_spec import Harness, JobRequest, JobSpec, ModelSpec, VariantSpec
from service.domain.status import JobStatus
from service.providers import ProviderRegistry, default_model
from service.settings import get_settings
from service.store.models import Job, Suite, queued_trial
from service.suites import load_suite, shipped_dir, shipped_suites

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
    planned: list[PlannedTrial] = []
    for round_ in range(1, rounds + 1):
        for case_id in cases:
            for variant in arms if round_ % 2 else tuple(reversed(arms)):
                planned.append(PlannedTrial(case_id, variant, round_, len(planned)))
    return planned


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


def docs_sets_dir() -> Path:
    return get_settings().docs_dir or shipped_dir() / "docs"


def registered_docs() -> list[str]:
    root = docs_sets_dir()
    return sorted(p.name for p in root.iterdir() if p.is_dir()) if root.is_dir() else []


def load_docs(name: str) -> dict[str, str]:
    if name not in registered_docs():
        known = ", ".join(registered_docs()) or "none"
        raise JobInputError(
            ("body", "docs"),
            f"Unknown docs set {name!r}; this box has: {known}. "
            'Or send the bundle itself as {"files": {"name.md": "..."}}.',
        )
    docs = {p.name: p.read_text() for p in sorted((docs_sets_dir() / name).glob("*.md"))}
    for file, content in docs.items():
        if marker := section_marker(content):
            raise JobInputError(
                ("body", "docs"),
                f"Docs set {name}: {file} has a line {marker!r}, which would read as a section "
                "of the system prompt; fix the file on the box.",
            )
    return docs


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
        docs = load_docs(request.docs) if isinstance(request.docs, str) else request.docs.files
    resolved: dict[str, VariantSpec] = {}
    for name, harness in variants.items():
        model = harness.model or request.model or _box_default()
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
            command=harness.command,
            limits=harness.limits or request.limits,
        )
    arms = ((baseline,) if baseline else ()) + tuple(v for v in variants if v != baseline)
    return Design(resolved, baseline, arms, docs, docs_name, tuple(cases))


def resolve_suite(request: JobRequest) -> SuiteBundle:
    if isinstance(request.suite, str):
        if request.suite not in shipped_suites():
            raise JobInputError(
                ("body", "suite"),
                f"Unknown suite {request.suite!r}; shipped suites: {', '.join(shipped_suites())}. "
                'Upload your own as {"name": ..., "source": ...}.',
            )
        return load_suite(request.suite)
    return SuiteBundle(name=request.suite.name, source=request.suite.source)


def select_cases(request: JobRequest, known: list[str], suite: str) -> list[str]:
    if not known:
        raise JobInputError(("body", "suite"), f"Suite {suite} defines no cases.")
    if request.cases is None:
        return known
    for index, case_id in enumerate(request.cases):
        if case_id not in known:
            raise JobInputError(
                ("body", "cases", index),
                f"Unknown case {case_id!r} in suite {suite}; its cases: {', '.join(known)}.",
            )
    return list(request.cases)


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
        own = request.variants is not None and request.variants[name].model is not None
        base: tuple[str | int, ...] = (
            ("body", "variants", name, "model") if own else ("body", "model")
        )
        problem = registry.model_problem(harness.model.provider, harness.model.id, scripts)
        if problem is not None:
            field, message = problem
            raise JobInputError((*base, field), message)


def create_job(
    session: Session,
    request: JobRequest,
    bundle: SuiteBundle,
    design: Design,
    *,
    image: str,
    image_digest: str | None,
    team_id: str | None = None,
) -> Job:
    sha = hashlib.sha256(bundle.source.encode()).hexdigest()
    now = datetime.now(UTC).replace(tzinfo=None)
    if session.get(Suite, sha) is None:
        session.add(Suite(sha256=sha, name=bundle.name, source=bundle.source, created_at=now))
        session.flush()  # no ORM relationship orders these inserts, so the suite goes first
    cases = list(design.cases)
    planned = plan(cases, request.rounds, design.arms)
    docs_sha = (
        hashlib.sha256(json.dumps(design.docs, sort_keys=True).encode()).hexdigest()
        if design.docs is not None
        else None
    )
    job = Job(
        id=f"job-{uuid.uuid4().hex[:16]}",
        status=JobStatus.QUEUED,
        team_id=team_id,
        suite_sha256=sha,
        suite_name=bundle.name,
        spec=JobSpec(
            **request.model_dump(exclude={"suite", "docs", "variants", "cases", "baseline"}),
            cases=cases,
            variants=design.variants,
            baseline=design.baseline,
            arms=list(design.arms),
            docs=design.docs,
            docs_name=design.docs_name,
            docs_sha256=docs_sha,
        ).model_dump(mode="json"),
        rounds=request.rounds,
        seed=request.seed,
        max_infra_retries=request.max_infra_retries,
        planned=len(planned),
        image=image,
        image_digest=image_digest,
        service_version=__version__,
        created_at=now,
        finished_at=None,
    )
    session.add(job)
    session.flush()
    session.add_all(queued_trial(job.id, p.case_id, p.variant, p.round, p.order) for p in planned)
    return job
