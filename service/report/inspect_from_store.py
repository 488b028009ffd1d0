"""A stored job's Inspect eval log (`service.report.inspect_log`): its trials and their
transcripts read from the store, one planned trial at a time."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from itertools import groupby
from typing import Any

from sqlalchemy.orm import Session

from service.domain.job_spec import JobSpec
from service.domain.status import TrialStatus
from service.report.inspect_log import eval_log, sample
from service.store import trials
from service.store.models import Event, Job, Trial

# Events read at once: a trial holds at most its worker's cap (sandbox/protocol.py, Limits).
_EVENTS_PAGE = 5000


def transcript(session: Session, trial_id: str) -> list[Event]:
    """Every event of the trial, in order."""
    found: list[Event] = []
    while True:
        page = trials.events_after(session, trial_id, found[-1].seq if found else 0, _EVENTS_PAGE)
        found.extend(page)
        if len(page) < _EVENTS_PAGE:
            return found


def finished_samples(session: Session, job: Job, spec: JobSpec) -> Iterator[dict[str, Any]]:
    """A sample per planned trial whose latest attempt has finished; its earlier attempts
    are its retries. A trial still queued or running is left out."""
    attempts: Sequence[Trial] = trials.job_trials(session, job.id)
    ordered = sorted(attempts, key=lambda t: (t.variant, t.order, t.attempt))
    for _, group in groupby(ordered, key=lambda t: (t.variant, t.order)):
        *earlier, latest = list(group)
        if latest.status != TrialStatus.FINISHED:
            continue
        yield sample(latest, transcript(session, latest.id), spec, retried=earlier)


def job_inspect_log(session: Session, job: Job) -> dict[str, Any]:
    spec = JobSpec.model_validate(job.spec)
    samples = sorted(finished_samples(session, job, spec), key=lambda s: (s["epoch"], s["id"]))
    return eval_log(job, samples)
