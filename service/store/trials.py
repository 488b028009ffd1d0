"""Reading trials, their events and their artifacts."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from sqlalchemy import LargeBinary, Row, func, select, text
from sqlalchemy.orm import Session

from service.domain.status import TrialStatus
from service.store.models import CHANGED_SINCE_PLANNED, Artifact, Event, Trial


def find_trial(session: Session, trial_id: str) -> Trial | None:
    return session.get(Trial, trial_id)


def job_trials(session: Session, job_id: str) -> Sequence[Trial]:
    """Every attempt of the job's trials, in plan order."""
    return session.scalars(
        select(Trial).where(Trial.job_id == job_id).order_by(Trial.order, Trial.attempt)
    ).all()


# What the grid and the event stream show of a trial's attempt.
_STATE = (
    Trial.id,
    Trial.case_id,
    Trial.variant,
    Trial.round,
    Trial.attempt,
    Trial.status,
    Trial.outcome,
)

# Plan orders asked for in one statement, at most: well below SQLite's 32,766 parameters.
_ORDERS_AT_ONCE = 5000


def grid_trials(
    session: Session, job_id: str, variants: Sequence[str], orders: Sequence[int]
) -> list[Row[str, str, str, int, int, str, str | None, str | None]]:
    """(id, case_id, variant, round, attempt, status, outcome, error_kind) of every attempt
    of the job's trials with these plan orders (of these variants): what the job page's grid
    shows. By (job, variant, order), the start of ix_trials_report."""
    found: list[Row[str, str, str, int, int, str, str | None, str | None]] = []
    for start in range(0, len(orders), _ORDERS_AT_ONCE):
        found += session.execute(
            select(*_STATE, Trial.error_kind).where(
                Trial.job_id == job_id,
                Trial.variant.in_(list(variants)),
                Trial.order.in_(list(orders[start : start + _ORDERS_AT_ONCE])),
            )
        ).all()
    return found


def started_trials(
    session: Session, job_id: str, changed_after: int = -1
) -> Sequence[Row[str, str, str, int, int, str, str | None]]:
    """(id, case_id, variant, round, attempt, status, outcome) of the job's trials that have
    started, running or finished, and changed after the job's version `changed_after`
    (`JobCounts.version`; -1: all of them)."""
    # Past a version (>= 0), only changed trials qualify: saying so in the index's own words
    # lets the database read ix_trials_changed, which holds only those.
    since = (text(CHANGED_SINCE_PLANNED),) if changed_after >= 0 else ()
    return session.execute(
        select(*_STATE).where(
            Trial.job_id == job_id,
            Trial.changed > changed_after,
            *since,
            Trial.status != TrialStatus.QUEUED,
        )
    ).all()


def events_after(session: Session, trial_id: str, after: int, limit: int) -> Sequence[Event]:
    """Up to `limit` of the trial's events with seq > `after`, in order."""
    return session.scalars(
        select(Event)
        .where(Event.trial_id == trial_id, Event.seq > after)
        .order_by(Event.seq)
        .limit(limit)
    ).all()


class LoggedEvent(NamedTuple):
    """One event of a transcript as stored, without the ORM's row object."""

    seq: int
    type: str
    payload: dict[str, Any]


def transcripts(session: Session, trial_ids: Sequence[str]) -> dict[str, list[LoggedEvent]]:
    """Every event of these trials, in order, by trial: one statement for them all (an
    export reads a job's whole transcripts; one statement a trial took most of its time)."""
    found: dict[str, list[LoggedEvent]] = {trial_id: [] for trial_id in trial_ids}
    rows = session.execute(
        select(Event.trial_id, Event.seq, Event.type, Event.payload)
        .where(Event.trial_id.in_(list(trial_ids)))
        .order_by(Event.trial_id, Event.seq)
    )
    for trial_id, seq, kind, payload in rows:
        found[trial_id].append(LoggedEvent(seq, kind, payload))
    return found


def artifact_names(session: Session, trial_id: str) -> Sequence[str]:
    return session.scalars(
        select(Artifact.name).where(Artifact.trial_id == trial_id).order_by(Artifact.name)
    ).all()


def artifact_heads(
    session: Session, trial_id: str, head_bytes: int
) -> list[tuple[str, int, bytes]]:
    """Each of the trial's artifacts as (name, size, its first `head_bytes` bytes), without
    reading the rest: enough for its page to tell text from binary."""
    head = func.substr(Artifact.content, 1, head_bytes, type_=LargeBinary)
    rows = session.execute(
        select(Artifact.name, Artifact.size, head).where(Artifact.trial_id == trial_id)
    )
    return [(name, size, bytes(start or b"")) for name, size, start in rows]


def find_artifact(session: Session, trial_id: str, name: str) -> Artifact | None:
    return session.scalar(
        select(Artifact).where(Artifact.trial_id == trial_id, Artifact.name == name)
    )
