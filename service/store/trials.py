"""Reading trials, their events and their artifacts."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import Row, select
from sqlalchemy.orm import Session

from service.domain.status import TrialStatus
from service.store.models import Artifact, Event, Trial


def find_trial(session: Session, trial_id: str) -> Trial | None:
    return session.get(Trial, trial_id)


def job_trials(session: Session, job_id: str) -> Sequence[Trial]:
    """Every attempt of the job's trials, in plan order."""
    return session.scalars(
        select(Trial).where(Trial.job_id == job_id).order_by(Trial.order, Trial.attempt)
    ).all()


def grid_trials(
    session: Session, job_id: str, cases: Sequence[str]
) -> Sequence[Row[str, str, str, int, int, str, str | None, str | None]]:
    """(id, case_id, variant, round, attempt, status, outcome, error_kind) of every attempt
    of the job's trials of these cases: what the job page's grid shows."""
    return session.execute(
        select(
            Trial.id,
            Trial.case_id,
            Trial.variant,
            Trial.round,
            Trial.attempt,
            Trial.status,
            Trial.outcome,
            Trial.error_kind,
        ).where(Trial.job_id == job_id, Trial.case_id.in_(list(cases)))
    ).all()


def started_trials(
    session: Session, job_id: str, changed_after: int = -1
) -> Sequence[Row[str, str, str, int, int, str, str | None]]:
    """(id, case_id, variant, round, attempt, status, outcome) of the job's trials that have
    started, running or finished, and changed after the job's version `changed_after`
    (`JobCounts.version`; -1: all of them)."""
    return session.execute(
        select(
            Trial.id,
            Trial.case_id,
            Trial.variant,
            Trial.round,
            Trial.attempt,
            Trial.status,
            Trial.outcome,
        ).where(
            Trial.job_id == job_id,
            Trial.changed > changed_after,
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


def artifact_names(session: Session, trial_id: str) -> Sequence[str]:
    return session.scalars(
        select(Artifact.name).where(Artifact.trial_id == trial_id).order_by(Artifact.name)
    ).all()


def find_artifact(session: Session, trial_id: str, name: str) -> Artifact | None:
    return session.scalar(
        select(Artifact).where(Artifact.trial_id == trial_id, Artifact.name == name)
    )
