"""The API's views of stored rows: a job with its counts, a trial with its artifacts."""

from __future__ import annotations

from sqlalchemy.orm import Session

from service.api.schemas import JobView, TrialCounts, TrialView
from service.artifact_names import artifact_name_problem
from service.domain.status import JobStatus
from service.store import counts, trials
from service.store.models import Job, Trial
from service.store.teams import team_by_id


def job_counts(session: Session, job_id: str) -> TrialCounts:
    # Planned trials by their latest attempt, so a retry never counts twice and the progress
    # bar only reaches the end when the retries have run. The store keeps them (one row);
    # only a job written without its counts row (a bulk load) is counted from its trials.
    kept = counts.read(session, job_id)
    if kept is None:
        return TrialCounts(**counts.count_trials(session, job_id))
    return TrialCounts(**kept.as_dict())


def job_view(session: Session, job: Job) -> JobView:
    team = team_by_id(session, job.team_id) if job.team_id else None
    return JobView(
        id=job.id,
        status=JobStatus(job.status),
        team=team.name if team else None,
        suite=job.suite_name,
        suite_sha256=job.suite_sha256,
        spec=job.spec,
        planned_trials=job.planned,
        counts=job_counts(session, job.id),
        created_at=job.created_at,
        finished_at=job.finished_at,
        error=job.error,
        builds=job.builds,
        concurrency=job.concurrency,
    )


def trial_view(session: Session, trial: Trial) -> TrialView:
    names = trials.artifact_names(session, trial.id)
    fields = {name: getattr(trial, name) for name in TrialView.model_fields if name != "artifacts"}
    # The download serves only valid names, so the listing shows only those too.
    valid = [name for name in names if artifact_name_problem(name) is None]
    return TrialView(**fields, artifacts=valid)
