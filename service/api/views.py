"""Reading the store for a caller: only the caller's team's jobs exist for it."""

from __future__ import annotations

from datetime import UTC, datetime

from fastapi import HTTPException
from sqlalchemy import Select, delete, select
from sqlalchemy.orm import Session

from service.api.context import Context
from service.api.schemas import JobView, TrialCounts, TrialView
from service.artifact_names import artifact_name_problem
from service.report.build import final_attempts

# The report moved to service.report.from_store; re-exported for this module's callers.
from service.report.from_store import clear_report_cache as clear_report_cache
from service.report.from_store import job_report as job_report
from service.store.models import Artifact, Job, Team, Trial
from service.teams import Principal


def visible_jobs(caller: Principal) -> Select[Job]:
    query = select(Job)
    if not caller.admin:
        query = query.where(Job.team_id == caller.team_id)
    return query


def get_job(session: Session, caller: Principal, job_id: str) -> Job:
    job = session.get(Job, job_id)
    # Another team's job answers exactly as a missing one: 404, never 403.
    if job is None or not (caller.admin or job.team_id == caller.team_id):
        raise HTTPException(404, f"No job {job_id}.")
    return job


def get_trial(session: Session, caller: Principal, trial_id: str) -> Trial:
    trial = session.get(Trial, trial_id)
    if trial is not None and not caller.admin:
        job = session.get(Job, trial.job_id)
        if job is None or job.team_id != caller.team_id:
            trial = None
    if trial is None:
        raise HTTPException(404, f"No trial {trial_id}.")
    return trial


def cancel_job(c: Context, caller: Principal, job_id: str) -> JobView:
    """Cancel a job: drop its queued trials and stop its running ones; keep what finished."""
    with c.sessions.begin() as session:
        job = get_job(session, caller, job_id)
        if job.status == "finished":
            raise HTTPException(409, f"Job {job_id} has finished; there is nothing to cancel.")
        if job.status != "cancelled":
            job.status = "cancelled"
            job.finished_at = datetime.now(UTC).replace(tzinfo=None)
            # Trials a control plane is claiming right now (row-locked on PostgreSQL) are
            # skipped rather than waited for, which could deadlock with the claim; they
            # start, see the cancel on the scheduler's next loop, and are dropped.
            queued = select(Trial.id).where(Trial.job_id == job_id, Trial.status == "queued")
            if session.get_bind().dialect.name == "postgresql":
                queued = queued.with_for_update(skip_locked=True)
            session.execute(delete(Trial).where(Trial.id.in_(queued)))
    # Our own containers die now; other control planes see the status on their next loop and
    # kill theirs. A running trial's row goes when its run returns (the scheduler drops it).
    c.scheduler.cancel(job_id)
    with c.sessions() as session:
        return job_view(session, get_job(session, caller, job_id))


def job_counts(session: Session, job_id: str) -> TrialCounts:
    rows = session.execute(
        select(Trial.variant, Trial.order, Trial.attempt, Trial.status, Trial.outcome).where(
            Trial.job_id == job_id
        )
    ).all()
    # Count planned trials by their latest attempt, so a retry never counts twice and the
    # progress bar only reaches the end when the retries have run.
    counts = TrialCounts(attempts=len(rows))
    for row in final_attempts(rows):
        setattr(counts, row.status, getattr(counts, row.status) + 1)
        if row.outcome:
            setattr(counts, row.outcome, getattr(counts, row.outcome) + 1)
    return counts


def job_view(session: Session, job: Job) -> JobView:
    team = session.get(Team, job.team_id) if job.team_id else None
    return JobView(
        id=job.id,
        status=job.status,  # type: ignore[arg-type]
        team=team.name if team else None,
        suite=job.suite_name,
        suite_sha256=job.suite_sha256,
        spec=job.spec,
        planned_trials=job.planned,
        counts=job_counts(session, job.id),
        created_at=job.created_at,
        finished_at=job.finished_at,
    )


def trial_view(session: Session, trial: Trial) -> TrialView:
    names = session.scalars(
        select(Artifact.name).where(Artifact.trial_id == trial.id).order_by(Artifact.name)
    ).all()
    fields = {name: getattr(trial, name) for name in TrialView.model_fields if name != "artifacts"}
    # The download serves only valid names, so the listing shows only those too.
    valid = [name for name in names if artifact_name_problem(name) is None]
    return TrialView(**fields, artifacts=valid)
