"""What a caller may see: a team its own jobs and their trials, an admin every team's.

Another team's job or trial answers exactly as a missing one: 404, never 403.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fastapi import HTTPException
from sqlalchemy.orm import Session

from service.api.schemas import ErrorBody
from service.store import jobs, trials
from service.store.models import Job, Trial
from service.teams import Principal

NOT_FOUND: dict[int | str, dict[str, Any]] = {404: {"model": ErrorBody}}


def newest_jobs(session: Session, caller: Principal, limit: int) -> Sequence[Job]:
    return jobs.newest_jobs(session, caller.team_id, limit, every_team=caller.admin)


def get_job(session: Session, caller: Principal, job_id: str) -> Job:
    job = jobs.find_job(session, job_id)
    if job is None or not (caller.admin or job.team_id == caller.team_id):
        raise HTTPException(404, f"No job {job_id}.")
    return job


def get_trial(session: Session, caller: Principal, trial_id: str) -> Trial:
    trial = trials.find_trial(session, trial_id)
    if trial is not None and not caller.admin:
        job = jobs.find_job(session, trial.job_id)
        if job is None or job.team_id != caller.team_id:
            trial = None
    if trial is None:
        raise HTTPException(404, f"No trial {trial_id}.")
    return trial
