"""The API's views of stored rows: a job with its counts, a trial with its artifacts; and the
job report."""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Text, cast, select
from sqlalchemy.orm import Session

# service/web/routes.py imports the access checks and the cancel from here.
from service.api.access import get_job as get_job
from service.api.access import get_trial as get_trial
from service.api.access import visible_jobs as visible_jobs
from service.api.cancel import cancel_job as cancel_job
from service.api.schemas import JobView, TrialCounts, TrialView
from service.artifact_names import artifact_name_problem
from service.domain.status import JobStatus
from service.report.build import JobFacts, TrialFacts, build_report, final_attempts
from service.store import trials
from service.store.models import Job, Trial
from service.store.teams import team_by_id


def job_counts(session: Session, job_id: str) -> TrialCounts:
    # Count planned trials by their latest attempt, so a retry never counts twice and the
    # progress bar only reaches the end when the retries have run.
    rows = trials.trial_states(session, job_id)
    counts = TrialCounts(attempts=len(rows))
    for row in final_attempts(rows):
        setattr(counts, row.status, getattr(counts, row.status) + 1)
        if row.outcome:
            setattr(counts, row.outcome, getattr(counts, row.outcome) + 1)
    return counts


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
    )


def trial_view(session: Session, trial: Trial) -> TrialView:
    names = trials.artifact_names(session, trial.id)
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
