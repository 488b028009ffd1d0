"""A stored job's report: its trials read from the store (`service.store.reports`), the
report built (`build_report`), and kept once the job can no longer change."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

import numpy as np
from sqlalchemy.orm import Session

from service.collector_pause import collector_paused
from service.domain.job_spec import JobSpec
from service.domain.status import JobStatus, TrialStatus
from service.lru import LRU
from service.report.build import JobFacts, TrialFacts, build_report
from service.report.columns import FIELDS, Columns
from service.report.model import Report
from service.report.reviewed import with_agreement
from service.store import counts, tallies
from service.store.models import Job
from service.store.reports import (
    REPORT_COLUMNS,
    job_environments,
    job_unbuilt,
    judge_counts,
    judge_rubrics,
    limits_by_attempt,
    models_returned,
    outcome_columns,
    report_columns,
)
from service.store.reviews import reviews_marker

assert TrialFacts._fields == REPORT_COLUMNS == FIELDS

# Recent reports, newest use last, by job, status and the job's change marker (its counts'
# version, `service.store.counts`): a report is a pure function of the job's row and trials,
# and every change of a trial's status or result raises the version, so a report with the
# same key is the same report. A large job's report takes long to build, and the job page,
# the API and the event stream all ask for it. A job without a marker (stored by a bulk
# load) is kept only once it can no longer change: finished, or cancelled with no trial
# queued or running (the scheduler still drops those rows).
# People's reviews change the report too (its agreement section): their marker is in the key.
# A 100k-trial report is a few MB.
_REPORTS: LRU[tuple[str, str, int | None, tuple[int, int, int]], Report] = LRU(8)


def clear_report_cache() -> None:
    _REPORTS.clear()


def job_report(session: Session, job: Job) -> Report:
    """The job's report. A cached one may be shared between callers (the model is frozen)."""
    key = (job.id, job.status, counts.version(session, job.id), reviews_marker(session, job.id))
    cached = _REPORTS.get(key)
    if cached is not None:
        return cached
    with collector_paused():
        report, settled = _build_job_report(session, job)
        report = with_agreement(session, job.id, report)
    final = job.status == JobStatus.FINISHED or (job.status == JobStatus.CANCELLED and settled)
    if key[2] is not None or final:
        _REPORTS.put(key, report)
    return report


def job_facts(
    job: Job,
    spec: JobSpec,
    environments: tuple[tuple[str, str, str, str | None], ...] = (),
    rubrics: tuple[tuple[str, str], ...] = (),
    unbuilt: tuple[tuple[str, str | None, str], ...] = (),
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
        unbuilt=unbuilt,
        networks=tuple(sorted((spec.networks or {}).items())),
        egress=spec.egress,
        error=job.error,
        bootstrap=spec.bootstrap,
        judge_model=(
            f"{spec.judge_model.provider}/{spec.judge_model.id}" if spec.judge_model else None
        ),
        judge_rubrics=rubrics,
    )


def _build_job_report(session: Session, job: Job) -> tuple[Report, bool]:
    """The report, and whether every trial had finished (none queued or running)."""
    spec = JobSpec.model_validate(job.spec)
    compared = spec.baseline is not None and len(spec.arms) > 1
    kept = tallies.read(session, job.id)
    if compared:
        # A comparison reads every trial's telemetry too; every row is finished once the
        # job's counts are settled.
        kept_counts = counts.read(session, job.id)
        settled = kept_counts is not None and kept_counts.settled
        columns = Columns.of(report_columns(session, job.id, all_finished=settled))
    else:
        columns = Columns.of(outcome_columns(session, job.id))
    returned = models_returned(session, job.id) if kept is None else tallies.models_of(kept)
    if limits := limits_by_attempt(session, job.id):
        columns = dataclasses.replace(columns, limits_hit=_rows_of(columns, limits))
    report = build_report(
        job_facts(
            job,
            spec,
            job_environments(session, job.id),
            judge_rubrics(session, job.id) if spec.judge_model else (),
            job_unbuilt(session, job.id),
        ),
        columns,
        case_order=spec.cases,
        generated_at=datetime.now(UTC).replace(tzinfo=None),
        models_returned=returned,
        judge_counts=judge_counts(session, job.id) if kept is None else tallies.judges_of(kept),
    )
    finished = columns.status.code(TrialStatus.FINISHED)
    return report, bool((columns.status.codes == finished).all())


def _rows_of(
    columns: Columns, by_attempt: dict[tuple[str, int, int], tuple[str, ...]]
) -> dict[int, tuple[str, ...]]:
    """The rows of `columns` that `by_attempt` names by (variant, order, attempt)."""
    # One integer key per row, sorted once; each attempt named is then a binary search.
    orders, attempts = int(columns.order.max()) + 1, int(columns.attempt.max()) + 1
    keys = (columns.variant.codes * orders + columns.order) * attempts + columns.attempt
    ranked = np.argsort(keys, kind="stable")
    ordered = keys[ranked]
    found: dict[int, tuple[str, ...]] = {}
    for (variant, order, attempt), hit in by_attempt.items():
        code = columns.variant.code(variant)
        if code < 0 or not 0 <= order < orders or not 0 <= attempt < attempts:
            continue
        key = (code * orders + order) * attempts + attempt
        first, last = np.searchsorted(ordered, [key, key + 1])
        for row in ranked[first:last].tolist():
            found[row] = hit
    return found
