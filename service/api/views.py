"""Reading the store for a caller: only the caller's team's jobs exist for it."""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from datetime import UTC, datetime
from typing import Any

from fastapi import HTTPException
from sqlalchemy import Select, Text, cast, delete, select
from sqlalchemy.orm import Session

from service.api.context import Context
from service.api.schemas import JobView, TrialCounts, TrialView
from service.artifact_names import artifact_name_problem
from service.report.build import JobFacts, TrialFacts, build_report, final_attempts
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


def _model_text(spec: dict[str, Any]) -> str:
    """The job's model, or each arm's when the variants name their own."""
    arms = {
        name: f"{h['model']['provider']}/{h['model']['id']}" for name, h in spec["variants"].items()
    }
    if len(set(arms.values())) == 1:
        return next(iter(arms.values()))
    return ", ".join(f"{name}: {model}" for name, model in arms.items())


def _limits(text: str | None) -> tuple[str, ...]:
    """A trial's `limits_hit`, read as JSON text: the usual empty list is not decoded."""
    if text is None or text == "[]":
        return ()
    return tuple(json.loads(text) or ())


# Reports of jobs that can no longer change, newest use last. A finished job's trials are
# final; a cancelled job's are once none is queued or running (the scheduler still drops
# those rows). A 100k-trial report takes seconds to build (its bootstrap draws dominate,
# bench/report_cost.py) and the job page, the API and the event stream all ask for it.
_FINAL_REPORTS: OrderedDict[tuple[str, str], dict[str, Any]] = OrderedDict()
_FINAL_REPORTS_KEPT = 8  # a 100k-trial report is a few MB
_final_reports_lock = threading.Lock()


def clear_report_cache() -> None:
    with _final_reports_lock:
        _FINAL_REPORTS.clear()


def job_report(session: Session, job: Job) -> dict[str, Any]:
    """The job's report. A finished or cancelled job's may be shared between callers, so it
    must not be modified."""
    key = (job.id, job.status)
    with _final_reports_lock:
        cached = _FINAL_REPORTS.get(key)
        if cached is not None:
            _FINAL_REPORTS.move_to_end(key)
            return cached
    report, settled = _build_job_report(session, job)
    if job.status == "finished" or (job.status == "cancelled" and settled):
        with _final_reports_lock:
            _FINAL_REPORTS[key] = report
            while len(_FINAL_REPORTS) > _FINAL_REPORTS_KEPT:
                _FINAL_REPORTS.popitem(last=False)
    return report


def _build_job_report(session: Session, job: Job) -> tuple[dict[str, Any], bool]:
    """The report, and whether every trial had finished (none queued or running)."""
    # Only the columns the report reads, with the few JSON fields it needs extracted by the
    # database: loading whole ORM rows (judges, final text, every timing) and decoding their
    # JSON was most of a 100k-trial report's time (bench/report_cost.py). `->>` and CAST on
    # PostgreSQL, JSON_EXTRACT on SQLite; the values are those the dicts held.
    rows = session.execute(
        select(
            Trial.case_id,
            Trial.variant,
            Trial.round,
            Trial.order,
            Trial.attempt,
            Trial.status,
            Trial.outcome,
            Trial.error_kind,
            Trial.model_returned,
            Trial.usage["input_tokens"].as_integer(),
            Trial.usage["output_tokens"].as_integer(),
            Trial.tool_calls,
            Trial.timings["run_agent"].as_float(),
            Trial.system_prompt_sha256,
            # As text: nearly every trial's is "[]", and decoding 100k of them was 0.4 s.
            cast(Trial.limits_hit, Text),
            Trial.usage["cost_usd"].as_float(),
        ).where(Trial.job_id == job.id)
    )
    facts = JobFacts(
        id=job.id,
        status=job.status,
        suite_name=job.suite_name,
        suite_sha256=job.suite_sha256,
        rounds=job.rounds,
        seed=job.seed,
        planned=job.planned,
        model=_model_text(job.spec),
        image=job.image,
        image_digest=job.image_digest,
        service_version=job.service_version,
        created_at=job.created_at,
        baseline=job.spec.get("baseline"),
        arms=tuple(job.spec.get("arms") or ()),
        docs_sha256=job.spec.get("docs_sha256"),
        docs_name=job.spec.get("docs_name"),
    )
    # The columns are selected in TrialFacts' field order; only limits_hit needs decoding.
    # (mypy cannot count a slice, so it fears the first 14 could reach the keywords.)
    trials = [
        TrialFacts(*row[:14], limits_hit=_limits(row[14]), cost_usd=row[15])  # type: ignore[misc]
        for row in rows
    ]
    report = build_report(
        facts,
        trials,
        case_order=job.spec["cases"],
        generated_at=datetime.now(UTC).replace(tzinfo=None),
    )
    return report, all(t.status == "finished" for t in trials)
