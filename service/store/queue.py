"""The trial queue: claiming queued trials for a control plane, within the teams' caps, and
putting trials back or dropping them.

Control planes on one database claim one at a time (`take_turns`), so each counts the
others' claims against the team caps, and every state change is a write conditional on the
state it expects, so a row another plane changed meanwhile is never taken from it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from sqlalchemy import delete, func, or_, select, update
from sqlalchemy.orm import Session, sessionmaker

from service.domain.status import JobStatus, TrialStatus
from service.store import counts
from service.store.clock import now
from service.store.db import CLAIM_LOCK, take_turns
from service.store.models import Artifact, Event, Job, JobCounts, Suite, Team, Trial
from service.store.queries import dict_of


class Claimed(NamedTuple):
    trial_id: str
    job_id: str


def claim(
    sessions: sessionmaker[Session], owner: str, limit: int, local_teams: Sequence[str | None]
) -> list[Claimed]:
    """Mark the next queued trials running for `owner`, in job then plan order, within each
    team's container cap and each job's own concurrency. `local_teams` holds a team for each
    container slot this plane has taken outside the queue (suite listings), counted against
    its team's cap."""
    with sessions.begin() as session:
        take_turns(session.connection(), CLAIM_LOCK)
        postgres = session.bind is not None and session.bind.dialect.name == "postgresql"
        queue = (
            select(Trial, Job.created_at, Job.team_id)
            .join(Job, Job.id == Trial.job_id)
            .where(Trial.status == TrialStatus.QUEUED, Job.status != JobStatus.CANCELLED)
            .order_by(Job.created_at, Trial.order, Trial.attempt)
        )
        if postgres:
            queue = queue.with_for_update(skip_locked=True, of=Trial)
        room = team_room(session)
        for team_id in local_teams:
            if team_id in room:
                room[team_id] -= 1
        jobs = job_room(session)
        # Capped teams and jobs are queried apart, each for no more than its room, so a
        # capped team's or job's long queue can never crowd the others out of the window.
        free = queue.where(
            or_(Job.team_id.is_(None), Job.team_id.not_in(room)), Job.id.not_in(jobs)
        )
        picks = list(session.execute(free.limit(limit)).all())
        for team_id, team_free in room.items():
            if team_free > 0:
                capped = queue.where(Job.team_id == team_id, Job.id.not_in(jobs))
                picks += session.execute(capped.limit(min(team_free, limit))).all()
        for job_id, job_free in jobs.items():
            if job_free > 0:
                capped = queue.where(Trial.job_id == job_id)
                picks += session.execute(capped.limit(min(job_free, limit))).all()
        picks.sort(key=lambda pick: (pick[1], pick[0].order, pick[0].attempt))
        # A capped job of a capped team was queried within the job's room alone: the team's
        # room is kept here, oldest job first.
        chosen: list[Trial] = []
        for trial, _, team_id in picks:
            if len(chosen) == limit:
                break
            if team_id in room:
                if room[team_id] <= 0:
                    continue
                room[team_id] -= 1
            chosen.append(trial)
        # The jobs' counts rows first (`counts.lock`): the version the claimed trials carry.
        versions = counts.lock(session, (trial.job_id for trial in chosen))
        claimed = []
        for trial in chosen:
            # SQLite's reads take no lock, so another process may have claimed this row since
            # we read it: only a write conditional on "queued" proves it is ours.
            won = session.connection().execute(
                update(Trial)
                .where(Trial.id == trial.id, Trial.status == TrialStatus.QUEUED)
                .values(
                    status=TrialStatus.RUNNING,
                    owner=owner,
                    started_at=now(),
                    changed=versions[trial.job_id],
                )
            )
            if won.rowcount != 1:
                continue
            claimed.append(Claimed(trial.id, trial.job_id))
            # Conditional too: a cancel committed meanwhile must not be overwritten.
            session.connection().execute(
                update(Job)
                .where(Job.id == trial.job_id, Job.status == JobStatus.QUEUED)
                .values(status=JobStatus.RUNNING)
            )
        for job_id, trial_ids in _by_job((c.job_id, c.trial_id) for c in claimed).items():
            n = len(trial_ids)
            counts.add(session, job_id, {"queued": -n, "running": n})
        return claimed


def _by_job(pairs: Any) -> dict[str, list[str]]:
    grouped: dict[str, list[str]] = {}
    for job_id, trial_id in pairs:
        grouped.setdefault(job_id, []).append(trial_id)
    return grouped


def team_room(session: Session) -> dict[str, int]:
    """Containers each capped team may still start, box-wide (all control planes)."""
    caps = dict_of(
        session, select(Team.id, Team.max_containers).where(Team.max_containers.is_not(None))
    )
    if not caps:
        return {}
    running = running_by_team(session)
    return {team: (cap or 0) - running.get(team, 0) for team, cap in caps.items()}


def job_room(session: Session) -> dict[str, int]:
    """Trials each job with a concurrency of its own may still start, box-wide (its running
    trials are counted in its counts row, kept under the claim lock)."""
    return dict_of(
        session,
        select(Job.id, Job.concurrency - JobCounts.running)
        .join(JobCounts, JobCounts.job_id == Job.id)
        .where(
            Job.concurrency.is_not(None),
            Job.status.in_((JobStatus.QUEUED, JobStatus.RUNNING)),
        ),
    )


def team_cap(session: Session, team_id: str) -> int | None:
    return session.scalar(select(Team.max_containers).where(Team.id == team_id))


def running_by_team(session: Session) -> dict[str | None, int]:
    """Trials running now, per team (None for admin-submitted jobs), across control planes."""
    return dict_of(
        session,
        select(Job.team_id, func.count())
        .select_from(Trial)
        .join(Job, Job.id == Trial.job_id)
        .where(Trial.status == TrialStatus.RUNNING)
        .group_by(Job.team_id),
    )


def requeue(sessions: sessionmaker[Session], *which: Any) -> list[str]:
    """Queue the running trials matching `which` again, with their partial transcripts
    dropped so nothing counts twice; returns their ids. The update itself checks the trials
    are still running as `which` says, so a trial another plane claimed since the caller
    looked is never taken from it."""
    with sessions.begin() as session:
        running = Trial.status == TrialStatus.RUNNING
        jobs = session.scalars(select(Trial.job_id).where(running, *which).distinct()).all()
        requeued: list[str] = []
        for job_id, version in counts.lock(session, jobs).items():
            ids = list(
                session.scalars(
                    update(Trial)
                    .where(running, Trial.job_id == job_id, *which)
                    .values(
                        status=TrialStatus.QUEUED,
                        owner=None,
                        container_id=None,
                        started_at=None,
                        changed=version,
                    )
                    .returning(Trial.id)
                ).all()
            )
            if ids:
                counts.add(session, job_id, {"running": -len(ids), "queued": len(ids)})
                requeued += ids
        if requeued:
            drop_transcripts(session, requeued)
    return requeued


def requeue_orphaned(sessions: sessionmaker[Session], live: set[str]) -> list[str]:
    """Queue again the running trials of every control plane not in `live`."""
    return requeue(sessions, or_(Trial.owner.is_(None), Trial.owner.not_in(live)))


def requeue_own(sessions: sessionmaker[Session], trial_id: str, owner: str) -> list[str]:
    return requeue(sessions, Trial.id == trial_id, Trial.owner == owner)


def cancelled_among(sessions: sessionmaker[Session], trial_ids: list[str]) -> list[str]:
    """Those of these trials whose job was cancelled (maybe by another control plane)."""
    with sessions() as session:
        return list(
            session.scalars(
                select(Trial.id)
                .join(Job, Job.id == Trial.job_id)
                .where(Trial.id.in_(trial_ids), Job.status == JobStatus.CANCELLED)
            ).all()
        )


def trial_known(sessions: sessionmaker[Session], trial_id: str) -> bool:
    with sessions() as session:
        return session.scalar(select(Trial.id).where(Trial.id == trial_id)) is not None


def trial_to_run(session: Session, trial_id: str) -> tuple[Trial, Job]:
    trial = session.get(Trial, trial_id)
    assert trial is not None
    job = session.get(Job, trial.job_id)
    assert job is not None
    return trial, job


def suite_kind(session: Session, sha256: str) -> str:
    """A stored suite's kind: 'python', or 'harbor' for a task suite."""
    suite = session.get(Suite, sha256)
    assert suite is not None
    return suite.kind


def suite_source(session: Session, sha256: str) -> tuple[str, str]:
    """A stored suite's name and source."""
    suite = session.get(Suite, sha256)
    assert suite is not None
    return suite.name, suite.source


def drop_trials(session: Session, trial_ids: list[str]) -> None:
    """Delete trials that have not ended (a cancelled job's), with their events and
    artifacts, and count them out of their jobs (whose counts rows the caller has locked)."""
    if trial_ids:
        rows = session.execute(
            select(Trial.job_id, Trial.variant, Trial.order, Trial.attempt, Trial.status).where(
                Trial.id.in_(trial_ids)
            )
        ).all()
        drop_transcripts(session, trial_ids)
        session.execute(delete(Trial).where(Trial.id.in_(trial_ids)))
        dropped: dict[str, list[tuple[str, int, int, str]]] = {}
        for job_id, variant, order, attempt, status in rows:
            dropped.setdefault(job_id, []).append((variant, order, attempt, status))
        for job_id, attempts in dropped.items():
            counts.forget(session, job_id, attempts)


def drop_transcripts(session: Session, trial_ids: list[str]) -> None:
    """Delete what these trials' runs wrote: their events and artifacts."""
    session.execute(delete(Event).where(Event.trial_id.in_(trial_ids)))
    session.execute(delete(Artifact).where(Artifact.trial_id.in_(trial_ids)))
