"""A stored job's report: its trials read from the store (`service.store.reports`), the
report built (`build_report`), and kept once the job can no longer change."""

from __future__ import annotations

import dataclasses
import threading
from collections import OrderedDict
from datetime import UTC, datetime

from sqlalchemy.orm import Session

from service.domain.job_spec import JobSpec
from service.domain.status import JobStatus, TrialStatus
from service.report.build import JobFacts, TrialFacts, build_report
from service.report.model import Report
from service.store.models import Job
from service.store.reports import REPORT_COLUMNS, job_environments, limits_hit, report_rows

assert tuple(f.name for f in dataclasses.fields(TrialFacts)) == REPORT_COLUMNS

# Reports of jobs that can no longer change, newest use last. A finished job's trials are
# final; a cancelled job's are once none is queued or running (the scheduler still drops
# those rows). A large job's report takes long to build (its bootstrap draws dominate), and
# the job page, the API and the event stream all ask for it.
_FINAL_REPORTS: OrderedDict[tuple[str, str], Report] = OrderedDict()
_FINAL_REPORTS_KEPT = 8  # a 100k-trial report is a few MB
_final_reports_lock = threading.Lock()


def clear_report_cache() -> None:
    with _final_reports_lock:
        _FINAL_REPORTS.clear()


def job_report(session: Session, job: Job) -> Report:
    """The job's report. A finished or cancelled job's may be shared between callers (the
    model is frozen)."""
    key = (job.id, job.status)
    with _final_reports_lock:
        cached = _FINAL_REPORTS.get(key)
        if cached is not None:
            _FINAL_REPORTS.move_to_end(key)
            return cached
    report, settled = _build_job_report(session, job)
    if job.status == JobStatus.FINISHED or (job.status == JobStatus.CANCELLED and settled):
        with _final_reports_lock:
            _FINAL_REPORTS[key] = report
            while len(_FINAL_REPORTS) > _FINAL_REPORTS_KEPT:
                _FINAL_REPORTS.popitem(last=False)
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
    # The columns come in TrialFacts' field order; only limits_hit needs decoding.
    # (mypy cannot count a slice, so it fears the first 14 could reach the keywords.)
    trials = [
        TrialFacts(*row[:14], limits_hit=limits_hit(row[14]), cost_usd=row[15])  # type: ignore[misc]
        for row in report_rows(session, job.id)
    ]
    report = build_report(
        job_facts(job, spec, job_environments(session, job.id)),
        trials,
        case_order=spec.cases,
        generated_at=datetime.now(UTC).replace(tzinfo=None),
    )
    finished = TrialStatus.FINISHED
    return report, all(t.status == finished for t in trials)
