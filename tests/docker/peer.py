"""A job whose trial another control plane on the store is running: it stays running for as
long as a test needs, and no container of ours runs it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sqlalchemy import select

from service.domain.job_spec import JobRequest, ModelSpec
from service.domain.planner import resolve_design
from service.domain.status import JobStatus, TrialStatus
from service.store.db import make_engine, session_factory
from service.store.jobs import create_job
from service.store.models import Plane, Team, Trial
from service.suites.python import load_suite

PEER = "peer-host.invalid:1:tests"


def peer_running_job(database_url: str, team: str | None = None) -> str:
    engine = make_engine(database_url)
    try:
        with session_factory(engine).begin() as session:
            team_id = session.scalar(select(Team.id).where(Team.name == team)) if team else None
            request = JobRequest(
                suite="smoke",
                cases=["create-greeting"],
                model=ModelSpec(provider="faux", id="solution"),
            )
            design = resolve_design(request, ["create-greeting"])
            job = create_job(
                session,
                request,
                load_suite("smoke"),
                design,
                image="examhall/sandbox:peer",
                image_digest=None,
                team_id=team_id,
            )
            session.flush()
            now = datetime.now(UTC).replace(tzinfo=None)
            for trial in session.scalars(select(Trial).where(Trial.job_id == job.id)):
                trial.status, trial.owner, trial.started_at = TrialStatus.RUNNING, PEER, now
            job.status = JobStatus.RUNNING
            # Beating far ahead, so no recovery pass takes its trial over during a test.
            if session.get(Plane, PEER) is None:
                session.add(Plane(owner=PEER, started_at=now, seen_at=now + timedelta(days=1)))
            return job.id
    finally:
        engine.dispose()
