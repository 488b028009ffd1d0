"""A stored job's report: its trials read from the store (`service.store.reports`), the
report built (`build_report`), and kept once the job can no longer change."""

from __future__ import annotations

import threading
from collections import OrderedDict
from datetime import UTC, datetime

from sqlalchemy.orm import Session

from service.domain.job_spec import JobSpec
from service.domain.status import JobStatus, TrialStatus
from service.report.build import JobFacts, TrialFacts, build_report
from service.report.model import Report
from service.store import counts
from service.store.models import Job
from service.store.reports import (
    REPORT_COLUMNS,
    job_environments,
    limits_by_attempt,
    limits_hit,
    models_returned,
    outcome_rows,
    report_rows,
)

assert TrialFacts._fields == REPORT_COLUMNS

# Recent reports, newest use last, by job, status and the job's change marker (its counts'
# version, `service.store.counts`): a report is a pure function of the job's row and trials,
# and every change of a trial's status or result raises the version, so a report with the
# same key is the same report. A large job's report takes long to build, and the job page,
# the API and the event stream all ask for it. A job without a marker (stored by a bulk
# load) is kept only once it can no longer change: finished, or cancelled with no trial
# queued or running (the scheduler still drops those rows).
_REPORTS: OrderedDict[tuple[str, str, int | None], Report] = OrderedDict()
_REPORTS_KEPT = 8  # a 100k-trial report is a few MB
_reports_lock = threading.Lock()


def clear_report_cache() -> None:
    with _reports_lock:
        _REPORTS.clear()


def job_report(session: Session, job: Job) -> Report:
    """The job's report. A cached one may be shared between callers (the model is frozen)."""
    key = (job.id, job.status, counts.version(session, job.id))
    with _reports_lock:
        cached = _REPORTS.get(key)
        if cached is not None:
            _REPORTS.move_to_end(key)
            return cached
    report, settled = _build_job_report(session, job)
    final = job.status == JobStatus.FINISHED or (job.status == JobStatus.CANCELLED and settled)
    if key[2] is not None or final:
        with _reports_lock:
            _REPORTS[key] = report
            while len(_REPORTS) > _REPORTS_KEPT:
                _REPORTS.popitem(last=False)
    return report


def job_facts(
    job: Job, spec: JobSpec, environments: tuple[tuple[str, str, str, str | None], ...] = ()
) -> JobFacts:
    return JobFacts(
        id=job.id,
        status=job.status,
        suite_name=job.suite_name,
        suite_sha256=job.suite_sha256,
        rounds=job.rounds,
        seed=job.seed,
        planned=job.planned,
        model=spec.model_text(),
        image=job.image,
        image_digest=job.image_digest,
        service_version=job.service_version,
        created_at=job.created_at,
        baseline=spec.baseline,
        arms=tuple(spec.arms),
        docs_sha256=spec.docs_sha256,
        docs_name=spec.docs_name,
        environments=environments,
        error=job.error,
        bootstrap=spec.bootstrap,
    )


def _build_job_report(session: Session, job: Job) -> tuple[Report, bool]:
    """The report, and whether every trial had finished (none queued or running)."""
    spec = JobSpec.model_validate(job.spec)
    compared = spec.baseline is not None and len(spec.arms) > 1
    returned: list[str] | None = None
    if compared:
        # A comparison reads every trial's telemetry. The columns come in TrialFacts' field
        # order; only limits_hit needs decoding. (mypy cannot count a slice, so it fears the
        # first 14 could reach the keywords.)
        trials = [
            TrialFacts(*row[:14], limits_hit=limits_hit(row[14]), cost_usd=row[15])  # type: ignore[misc]
            for row in report_rows(session, job.id)
        ]
    else:
        trials = [TrialFacts(*row, None) for row in outcome_rows(session, job.id)]  # type: ignore[call-arg]
        if limits := limits_by_attempt(session, job.id):
            trials = [
                t._replace(limits_hit=hit)
                if (hit := limits.get((t.variant, t.order, t.attempt)))
                else t
                for t in trials
            ]
        returned = models_returned(session, job.id)
    report = build_report(
        job_facts(job, spec, job_environments(session, job.id)),
        trials,
        case_order=spec.cases,
        generated_at=datetime.now(UTC).replace(tzinfo=None),
        models_returned=returned,
    )
    finished = TrialStatus.FINISHED
    return report, all(t.status == finished for t in trials)
