"""The counts /metrics reports, read from the store so they agree across control planes."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import case, func, select
from sqlalchemy.orm import Session

from service.domain.status import TrialStatus
from service.store.models import Job, JobCounts, Team, Trial
from service.store.queries import dict_of


def finished_by_outcome(session: Session) -> dict[Any, int]:
    """Finished trial attempts per outcome."""
    return dict_of(
        session,
        select(Trial.outcome, func.count())
        .where(Trial.status == TrialStatus.FINISHED)
        .group_by(Trial.outcome),
    )


def active_by_status(session: Session) -> dict[Any, int]:
    """Queued and running trials per status."""
    return dict_of(
        session,
        select(Trial.status, func.count())
        .where(Trial.status.in_((TrialStatus.QUEUED, TrialStatus.RUNNING)))
        .group_by(Trial.status),
    )


@dataclass(frozen=True)
class TeamQueue:
    """A team's place at the queue (service/store/queue.py serves teams in turn by share)."""

    team: str  # its name; "admin" for jobs an admin token submitted
    share: int
    queued: int
    running: int


def queue_by_team(session: Session) -> list[TeamQueue]:
    """Every team with trials queued or running, by name, from the jobs' counts rows."""
    rows = session.execute(
        select(
            Team.name,
            Team.share,
            func.sum(JobCounts.queued),
            func.sum(JobCounts.running),
        )
        .select_from(Job)
        .join(JobCounts, JobCounts.job_id == Job.id)
        .outerjoin(Team, Team.id == Job.team_id)
        .where((JobCounts.queued > 0) | (JobCounts.running > 0))
        .group_by(Team.name, Team.share)
    )
    teams = [
        TeamQueue(name or ADMIN_QUEUE, share or 1, int(queued or 0), int(running or 0))
        for name, share, queued, running in rows
    ]
    return sorted(teams, key=lambda t: t.team)


# What the queue's tables call the jobs of admin tokens, which belong to no team: no team's
# name can be it (names are letters, digits, '-' and '_').
ADMIN_QUEUE = "(admin)"


def jobs_by_status(session: Session) -> dict[Any, int]:
    return dict_of(session, select(Job.status, func.count()).group_by(Job.status))


@dataclass(frozen=True)
class Durations:
    """Finished trials' wall times as a cumulative histogram over `buckets` (upper bounds)."""

    count: int
    total_s: float
    cumulative: Sequence[int | None]


def finished_durations(session: Session, buckets: Sequence[float]) -> Durations:
    timed = Trial.wall_s.is_not(None) & (Trial.status == TrialStatus.FINISHED)
    columns = [func.sum(case((Trial.wall_s <= b, 1), else_=0)) for b in buckets]
    row = session.execute(
        select(func.count(), func.coalesce(func.sum(Trial.wall_s), 0.0), *columns).where(timed)
    ).one()
    return Durations(row[0], row[1], row[2:])
