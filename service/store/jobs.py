"""Jobs in the store: creating one with its queued trials, finding, listing, cancelling."""

from __future__ import annotations

import hashlib
import uuid
from datetime import UTC, datetime

from sqlalchemy.orm import Session

from sandbox.protocol import SuiteBundle
from service import __version__
from service.domain.job_spec import JobRequest
from service.domain.planner import Design, job_spec, plan
from service.domain.status import JobStatus
from service.store.models import Job, Suite, queued_trial


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


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
    now = _now()
    if session.get(Suite, sha) is None:
        session.add(Suite(sha256=sha, name=bundle.name, source=bundle.source, created_at=now))
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
        created_at=now,
        finished_at=None,
    )
    session.add(job)
    session.flush()
    session.add_all(queued_trial(job.id, p.case_id, p.variant, p.round, p.order) for p in planned)
    return job
