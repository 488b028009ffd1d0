"""Jobs in the store: creating one with its queued trials, finding, listing, cancelling."""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Sequence

from sqlalchemy import Select, delete, select
from sqlalchemy.orm import Session

from sandbox.protocol import SuiteBundle
from service import __version__
from service.domain.job_spec import JobRequest
from service.domain.planner import Design, job_spec, plan
from service.domain.status import JobStatus, TrialStatus
from service.store.clock import now
from service.store.models import Job, Suite, Trial, queued_trial


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
    """The job's row, its suite's (once per source) and a queued row per planned trial."""
    sha = hashlib.sha256(bundle.source.encode()).hexdigest()
    at = now()
    if session.get(Suite, sha) is None:
        session.add(Suite(sha256=sha, name=bundle.name, source=bundle.source, created_at=at))
        session.flush()  # no ORM relationship orders these inserts, so the suite goes first
    planned = plan(list(design.cases), request.rounds, design.arms)
    job = Job(
        id=f"job-{uuid.uuid4().hex[:16]}",
        status=JobStatus.QUEUED,
        team_id=team_id,
        suite_sha256=sha,
        suite_name=bundle.name,
        spec=job_spec(request, design).model_dump(mode="json"),
        rounds=request.rounds,
        seed=request.seed,
        max_infra_retries=request.max_infra_retries,
        planned=len(planned),
        image=image,
        image_digest=image_digest,
        service_version=__version__,
        created_at=at,
        finished_at=None,
    )
    session.add(job)
    session.flush()
    session.add_all(queued_trial(job.id, p.case_id, p.variant, p.round, p.order) for p in planned)
    return job


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
    job.status = JobStatus.CANCELLED
    job.finished_at = now()
    # Trials a control plane is claiming right now (row-locked on PostgreSQL) are skipped
    # rather than waited for, which could deadlock with the claim; they start, see the
    # cancel on the scheduler's next loop, and are dropped.
    queued = select(Trial.id).where(Trial.job_id == job.id, Trial.status == TrialStatus.QUEUED)
    if session.get_bind().dialect.name == "postgresql":
        queued = queued.with_for_update(skip_locked=True)
    session.execute(delete(Trial).where(Trial.id.in_(queued)))
