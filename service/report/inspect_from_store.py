"""A stored job's Inspect eval log (`service.report.inspect_log`): its trials and their
transcripts read from the store, a batch of trials at a time."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from itertools import groupby
from typing import Any

from sqlalchemy.orm import Session

from service.domain.job_spec import JobSpec
from service.domain.status import TrialStatus
from service.report.inspect_log import eval_log, sample
from service.store import trials
from service.store.models import Job, Trial

# Trials whose transcripts are read in one statement: well below SQLite's 32,766 parameters,
# and a bounded share of a large job's events in memory at once.
_TRIALS_AT_ONCE = 500


def attempts_by_trial(attempts: Sequence[Trial]) -> Iterator[tuple[Trial, list[Trial]]]:
    """Each planned trial's latest attempt, when it has finished, with the attempts before
    it; a trial still queued or running is left out."""
    ordered = sorted(attempts, key=lambda t: (t.variant, t.order, t.attempt))
    for _, group in groupby(ordered, key=lambda t: (t.variant, t.order)):
        *earlier, latest = list(group)
        if latest.status == TrialStatus.FINISHED:
            yield latest, earlier


def finished_samples(session: Session, job: Job, spec: JobSpec) -> Iterator[dict[str, Any]]:
    """A sample per planned trial whose latest attempt has finished."""
    found = list(attempts_by_trial(trials.job_trials(session, job.id)))
    for start in range(0, len(found), _TRIALS_AT_ONCE):
        batch = found[start : start + _TRIALS_AT_ONCE]
        events = trials.transcripts(session, [latest.id for latest, _ in batch])
        for latest, earlier in batch:
            yield sample(latest, events[latest.id], spec, retried=earlier)


def job_inspect_log(session: Session, job: Job) -> dict[str, Any]:
    spec = JobSpec.model_validate(job.spec)
    samples = sorted(finished_samples(session, job, spec), key=lambda s: (s["epoch"], s["id"]))
    return eval_log(job, samples)
