"""Turning a job request into stored, ordered trials."""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy.orm import Session

from sandbox.protocol import SuiteBundle
from service import __version__
from service.api.schemas import JobRequest
from service.store.models import Job, Suite, Trial
from service.suites import SuiteError, load_suite, shipped_suites

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
    cases: list[str], rounds: int, variants: tuple[str, ...] = (DEFAULT_VARIANT,)
) -> list[PlannedTrial]:
    """Round by round, so a job stopped early still covers every case evenly."""
    planned: list[PlannedTrial] = []
    for round_ in range(1, rounds + 1):
        for case_id in cases:
            for variant in variants:
                planned.append(PlannedTrial(case_id, variant, round_, len(planned)))
    return planned


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


def create_job(
    session: Session,
    request: JobRequest,
    bundle: SuiteBundle,
    cases: list[str],
    *,
    image: str,
    image_digest: str | None,
) -> Job:
    sha = hashlib.sha256(bundle.source.encode()).hexdigest()
    now = datetime.now(UTC).replace(tzinfo=None)
    if session.get(Suite, sha) is None:
        session.add(Suite(sha256=sha, name=bundle.name, source=bundle.source, created_at=now))
        session.flush()  # no ORM relationship orders these inserts, so the suite goes first
    planned = plan(cases, request.rounds)
    job = Job(
        id=f"job-{uuid.uuid4().hex[:16]}",
        status="queued",
        suite_sha256=sha,
        suite_name=bundle.name,
        spec={**request.model_dump(mode="json", exclude={"suite"}), "cases": cases},
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
    session.add_all(
        Trial(
            id=f"trial-{uuid.uuid4().hex[:16]}",
            job_id=job.id,
            case_id=p.case_id,
            variant=p.variant,
            round=p.round,
            order=p.order,
            attempt=1,
            status="queued",
        )
        for p in planned
    )
    return job


__all__ = ["JobInputError", "SuiteError", "create_job", "plan", "resolve_suite", "select_cases"]
