"""Jobs in the store: creating one with its queued trials, finding, listing, cancelling."""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sqlalchemy import Select, delete, select, update
from sqlalchemy.orm import Session

from sandbox.protocol import SuiteBundle
from service import __version__
from service.domain.job_spec import JobRequest, JobSpec
from service.domain.planner import Design, job_spec, plan_tuples
from service.domain.status import BUILD_ERROR, JobStatus, Outcome, TrialStatus
from service.store import counts
from service.store.clock import now
from service.store.models import Job, Suite, Trial
from service.store.planned_trials import insert_rows, planned_rows


@dataclass(frozen=True)
class StoredSuite:
    """A suite already in the suites table (a task suite's archive)."""

    sha256: str
    name: str


def create_job(
    session: Session,
    request: JobRequest,
    suite: SuiteBundle | StoredSuite,
    design: Design,
    *,
    image: str,
    image_digest: str | None,
    team_id: str | None = None,
) -> Job:
    """The job's row, its suite's (once per source) and a queued row per planned trial. A
    task suite's job waits in `building` without trials: they are planned by
    `start_built_job` once its environments are built."""
    at = now()
    if isinstance(suite, SuiteBundle):
        sha = hashlib.sha256(suite.source.encode()).hexdigest()
        if session.get(Suite, sha) is None:
            session.add(Suite(sha256=sha, name=suite.name, source=suite.source, created_at=at))
            session.flush()  # no ORM relationship orders these inserts: the suite goes first
    else:
        sha = suite.sha256
    planned = len(design.cases) * len(design.arms) * request.rounds
    job = Job(
        id=f"job-{uuid.uuid4().hex[:16]}",
        status=(
            JobStatus.QUEUED
            if isinstance(suite, SuiteBundle) and not design.builds
            else JobStatus.BUILDING
        ),
        team_id=team_id,
        suite_sha256=sha,
        suite_name=suite.name,
        spec=job_spec(request, design).model_dump(mode="json"),
        rounds=request.rounds,
        seed=request.seed,
        max_infra_retries=request.max_infra_retries,
        planned=planned,
        concurrency=request.concurrency,
        priority=request.priority,
        image=image,
        image_digest=image_digest,
        service_version=__version__,
        created_at=at,
        finished_at=None,
    )
    session.add(job)
    session.flush()
    if job.status == JobStatus.QUEUED:
        rows = planned_rows(job.id, plan_tuples(design.cases, request.rounds, design.arms))
        insert_rows(session, rows)
        counts.start(session, job.id, queued=len(rows))
    else:
        counts.start(session, job.id, queued=0)
    return job


def building_jobs(session: Session) -> list[tuple[str, str | None]]:
    """The jobs whose environments are waiting to be built, oldest first, each with its
    team (None: an admin's)."""
    query = (
        select(Job.id, Job.team_id).where(Job.status == JobStatus.BUILDING).order_by(Job.created_at)
    )
    return [(job_id, team_id) for job_id, team_id in session.execute(query)]


@dataclass(frozen=True)
class Unbuilt:
    """A case whose environment did not build: why, and the build's step that failed."""

    error: str
    step: str | None


def start_built_job(
    session: Session,
    job_id: str,
    images: Mapping[tuple[str, str], tuple[str, str | None]],
    unbuilt: Mapping[str, Unbuilt] | None = None,
) -> bool:
    """Plan a built job's trials, each with the image and digest of its (case, variant) (one
    without an environment or agent of its own runs in the job's image), and queue it; False
    when it is no longer building (cancelled meanwhile, or planned by another plane).

    The trials of an `unbuilt` case end at once with its build's error, as `build_error`:
    unscored (the suite's task is broken, not the agent), never retried (the same build
    would fail again), and listed in the report with the step."""
    version = counts.lock(session, [job_id])[job_id]  # before the job's row, as every writer
    won = session.execute(
        update(Job)
        .where(Job.id == job_id, Job.status == JobStatus.BUILDING)
        .values(status=JobStatus.QUEUED)
    )
    if won.rowcount != 1:  # type: ignore[attr-defined]
        return False
    job = session.get(Job, job_id, populate_existing=True)
    assert job is not None
    spec = JobSpec.model_validate(job.spec)
    rows = planned_rows(job.id, plan_tuples(spec.cases, job.rounds, tuple(spec.arms)), images)
    insert_rows(session, rows)
    ended = 0
    for case, why in (unbuilt or {}).items():
        done = session.execute(
            update(Trial)
            .where(Trial.job_id == job.id, Trial.case_id == case)
            .values(
                status=TrialStatus.FINISHED,
                outcome=Outcome.ERROR,
                error_kind=BUILD_ERROR,
                error_message=why.error,
                failed_step=why.step[:40] if why.step else None,
                finished_at=now(),
                changed=version,
            )
        )
        ended += done.rowcount  # type: ignore[attr-defined]
    deltas = {"queued": len(rows) - ended, "attempts": len(rows)}
    counts.add(session, job.id, {**deltas, "finished": ended, "error": ended})
    if ended == len(rows):
        job.status = JobStatus.FINISHED
        job.finished_at = now()
    return True


def fail_job(session: Session, job_id: str, error: str) -> bool:
    """End a job that cannot run (an environment that did not build), with why; no trial of
    it ever starts. False when it is no longer building."""
    done = session.execute(
        update(Job)
        .where(Job.id == job_id, Job.status == JobStatus.BUILDING)
        .values(status=JobStatus.FINISHED, error=error, finished_at=now())
    )
    return bool(done.rowcount == 1)  # type: ignore[attr-defined]


def find_job(session: Session, job_id: str) -> Job | None:
    return session.get(Job, job_id)


def jobs_query(team_id: str | None, *, every_team: bool = False) -> Select[Job]:
    """The jobs of one team (`team_id` None: those submitted with an admin token), or of
    every team."""
    query = select(Job)
    if not every_team:
        query = query.where(Job.team_id == team_id)
    return query


def newest_jobs(
    session: Session, team_id: str | None, limit: int, *, every_team: bool = False
) -> Sequence[Job]:
    """Up to `limit` jobs of one team, or of every team, newest first."""
    query = jobs_query(team_id, every_team=every_team).order_by(Job.created_at.desc())
    return session.scalars(query.limit(limit)).all()


def mark_cancelled(session: Session, job: Job) -> None:
    """Cancel the job in the store and drop its queued trials; a cancelled job stays as it is.

    Running trials keep their rows: the scheduler that runs one stops it and drops the row."""
    if job.status == JobStatus.CANCELLED:
        return
    counts.lock(session, [job.id])  # before the job's row, as every writer (`counts`)
    job.status = JobStatus.CANCELLED
    job.finished_at = now()
    # Trials a control plane is claiming right now (row-locked on PostgreSQL) are skipped
    # rather than waited for, which could deadlock with the claim; they start, see the
    # cancel on the scheduler's next loop, and are dropped.
    queued = select(Trial.id).where(Trial.job_id == job.id, Trial.status == TrialStatus.QUEUED)
    if session.get_bind().dialect.name == "postgresql":
        queued = queued.with_for_update(skip_locked=True)
    session.execute(delete(Trial).where(Trial.id.in_(queued)))
    # Rare, and not a simple delta (a dropped retry leaves its earlier attempt the latest):
    # counted afresh.
    counts.recount(session, job.id)
