"""The trial queue: claiming queued trials for a control plane, within the teams' caps, and
putting trials back or dropping them.

Control planes on one database claim one at a time (`take_turns`), so each counts the
others' claims against the team caps, and every state change is a write conditional on the
state it expects, so a row another plane changed meanwhile is never taken from it.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from sqlalchemy import delete, func, or_, select, update
from sqlalchemy.orm import Session, sessionmaker

from service.domain.status import JobStatus, TrialStatus
from service.store import counts
from service.store.clock import now
from service.store.db import CLAIM_LOCK, reading, take_turns
from service.store.models import Artifact, Event, Job, JobCounts, Suite, Team, Trial
from service.store.queries import dict_of


class Claimed(NamedTuple):
    trial_id: str
    job_id: str


@dataclass(frozen=True)
class ClaimedTrial:
    """A trial a claim marked running, with what of its row its run needs: the claim has
    read the row already, and a trial's planned fields never change once queued."""

    trial_id: str
    job_id: str
    case_id: str
    variant: str
    round: int
    image: str | None
    image_digest: str | None

    @classmethod
    def of(cls, trial: Trial) -> ClaimedTrial:
        return cls(
            trial.id,
            trial.job_id,
            trial.case_id,
            trial.variant,
            trial.round,
            trial.image,
            trial.image_digest,
        )


def claim(
    sessions: sessionmaker[Session], owner: str, limit: int, local_teams: Sequence[str | None]
) -> list[ClaimedTrial]:
    """Mark the next queued trials running for `owner`: teams take turns in proportion to
    their shares, by what each runs box-wide (all control planes); within a team, jobs go by
    priority, then age, then plan order; every team's container cap and job's concurrency
    holds. `local_teams` holds a team for each container slot this plane has taken outside
    the queue (suite listings), counted as that team's running container."""
    with sessions.begin() as session:
        take_turns(session.connection(), CLAIM_LOCK)
        postgres = session.bind is not None and session.bind.dialect.name == "postgresql"
        waiting = waiting_jobs(session)
        # Only the teams with trials waiting can take any: their caps came with their jobs.
        caps = {job.team_id: job.cap for job in waiting if job.cap is not None}
        running, room = room_by_team(session, local_teams, caps)
        shares = {job.team_id: job.share for job in waiting}
        heads: dict[str | None, list[Any]] = {}
        for team_id in shares:
            take = min(limit, room.get(team_id, limit))
            team_jobs = [job for job in waiting if job.team_id == team_id]
            if take > 0 and (picks := _team_queue(session, team_jobs, take, postgres)):
                heads[team_id] = picks
        chosen = by_share(heads, shares, running, limit)
        # The jobs' counts rows first (`counts.lock`): the version the claimed trials carry.
        versions = counts.lock(session, (trial.job_id for trial in chosen))
        # One write per job. On SQLite it is conditional on "queued": its reads take no lock,
        # so another process may have claimed a row since we read it, and only the rows the
        # write changed (RETURNING) are ours. On PostgreSQL the rows are ours already (read
        # FOR UPDATE, skipping others' locks), and the condition would cost more than it
        # checks: with no statistics yet (a young store, a large job just submitted) the
        # planner reads the write's rows by the queue's status index, every queued trial,
        # rather than by their ids.
        still_queued = () if postgres else (Trial.status == TrialStatus.QUEUED,)
        won: set[str] = set()
        for job_id, trial_ids in _by_job((t.job_id, t.id) for t in chosen).items():
            won.update(
                session.scalars(
                    update(Trial)
                    .where(Trial.id.in_(trial_ids), *still_queued)
                    .values(
                        status=TrialStatus.RUNNING,
                        owner=owner,
                        started_at=now(),
                        changed=versions[job_id],
                    )
                    .returning(Trial.id),
                    execution_options={"synchronize_session": False},
                )
            )
        claimed = [ClaimedTrial.of(t) for t in chosen if t.id in won]
        started = {job.id for job in waiting if job.status == JobStatus.QUEUED}
        for job_id, trial_ids in _by_job((c.job_id, c.trial_id) for c in claimed).items():
            if job_id in started:
                # Conditional too: a cancel committed meanwhile must not be overwritten.
                session.connection().execute(
                    update(Job)
                    .where(Job.id == job_id, Job.status == JobStatus.QUEUED)
                    .values(status=JobStatus.RUNNING)
                )
            n = len(trial_ids)
            counts.add(session, job_id, {"queued": -n, "running": n})
        return claimed


@dataclass(frozen=True)
class WaitingJob:
    """A job with trials queued, as the claim orders and bounds it."""

    id: str
    status: str
    team_id: str | None
    share: int  # its team's share of the turns (1 for admins' jobs)
    cap: int | None  # its team's most containers at once, box-wide
    priority: int
    created_at: Any
    room: int | None  # the trials it may still start box-wide, with a concurrency of its own


def waiting_jobs(session: Session) -> list[WaitingJob]:
    """The jobs with trials queued, in the order their teams serve them: priority, then age.
    One read of the jobs and their counts rows, not of their trials, so a claim costs the
    same with a hundred thousand trials queued as with ten. A job's running trials are
    counted in its counts row, kept under the claim lock. A job stored without its counts
    row (a bulk load; `counts.lock` makes the row at its first change) may have trials
    queued too, so it waits as well."""
    rows = session.execute(
        select(
            Job.id,
            Job.status,
            Job.team_id,
            Team.share,
            Team.max_containers,
            Job.priority,
            Job.created_at,
            Job.concurrency,
            JobCounts.running,
        )
        .outerjoin(JobCounts, JobCounts.job_id == Job.id)
        .outerjoin(Team, Team.id == Job.team_id)
        .where(
            or_(JobCounts.queued > 0, JobCounts.job_id.is_(None)),
            Job.status.in_((JobStatus.QUEUED, JobStatus.RUNNING)),
        )
        .order_by(Job.priority.desc(), Job.created_at, Job.id)
    )
    return [
        WaitingJob(
            job_id,
            status,
            team_id,
            share or 1,
            cap,
            priority,
            created_at,
            None if concurrency is None else max(0, concurrency - (running or 0)),
        )
        for job_id, status, team_id, share, cap, priority, created_at, concurrency, running in rows
    ]


def _team_queue(session: Session, jobs: list[WaitingJob], take: int, postgres: bool) -> list[Any]:
    """The team's next `take` queued trials in its own order (priority, age, plan), each as
    (trial, priority, created_at): from its jobs in that order, each read by the queue's
    index and no further than needed; a job with a concurrency of its own gives no more
    than its room. On PostgreSQL the rows are locked, skipping those another plane holds."""
    picks: list[Any] = []
    for job in jobs:
        want = take - len(picks) if job.room is None else min(job.room, take - len(picks))
        if want <= 0:
            if len(picks) >= take:
                break
            continue
        queue = (
            select(Trial)
            .where(Trial.status == TrialStatus.QUEUED, Trial.job_id == job.id)
            .order_by(Trial.order, Trial.attempt)
            .limit(want)
        )
        if postgres:
            queue = queue.with_for_update(skip_locked=True)
        picks += [(trial, job.priority, job.created_at) for trial in session.scalars(queue)]
    return picks


def by_share(
    heads: dict[str | None, list[Any]],
    shares: dict[str | None, int],
    running: dict[str | None, int],
    limit: int,
) -> list[Trial]:
    """Up to `limit` trials from the teams' queues (`heads`, each in the team's own order),
    one at a time to the team running the fewest for its share; a tie goes to the team
    whose next trial was queued first, so with one team this is its own order."""
    turns: list[tuple[float, Any, int, int, int]] = []
    teams = list(heads)
    for index, team_id in enumerate(teams):
        _, _, created_at = heads[team_id][0]
        load = running.get(team_id, 0) / shares[team_id]
        turns.append((load, created_at, heads[team_id][0][0].order, index, 0))
    heapq.heapify(turns)
    chosen: list[Trial] = []
    while turns and len(chosen) < limit:
        _, _, _, index, taken = heapq.heappop(turns)
        team_id = teams[index]
        chosen.append(heads[team_id][taken][0])
        taken += 1
        if taken < len(heads[team_id]):
            trial, _, created_at = heads[team_id][taken]
            load = (running.get(team_id, 0) + taken) / shares[team_id]
            heapq.heappush(turns, (load, created_at, trial.order, index, taken))
    return chosen


def _by_job(pairs: Any) -> dict[str, list[str]]:
    grouped: dict[str, list[str]] = {}
    for job_id, trial_id in pairs:
        grouped.setdefault(job_id, []).append(trial_id)
    return grouped


def team_room(
    session: Session,
    running: dict[str | None, int],
    caps: Mapping[str | None, int] | None = None,
) -> dict[str | None, int]:
    """Containers each capped team may still start, box-wide (all control planes), given
    the trials each team runs now (`running_by_team`); of the teams in `caps` (team, cap)
    when given, else of every capped team, whose caps are read."""
    if caps is None:
        caps = dict_of(
            session, select(Team.id, Team.max_containers).where(Team.max_containers.is_not(None))
        )
    if not caps:
        return {}
    return {team: (cap or 0) - running.get(team, 0) for team, cap in caps.items()}


def room_by_team(
    session: Session,
    local_teams: Sequence[str | None],
    caps: Mapping[str | None, int] | None = None,
) -> tuple[dict[str | None, int], dict[str | None, int]]:
    """The containers each team runs box-wide, and what each capped team (of `caps`, when
    given, as `team_room`) may still start: every control plane's running trials, and a
    container for each of `local_teams` (the slots a plane took outside the queue,
    `claim`'s)."""
    running = running_by_team(session)
    room = team_room(session, running, caps)
    for team_id in local_teams:
        running[team_id] = running.get(team_id, 0) + 1
        if team_id in room:
            room[team_id] -= 1
    return running, room


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


def requeue_unrun(sessions: sessionmaker[Session], owner: str, running: set[str]) -> list[str]:
    """Queue again `owner`'s running trials other than those it runs (`running`): a claim
    whose commit reached the store while its answer was lost with the connection."""
    return requeue(sessions, Trial.owner == owner, Trial.id.not_in(running))


def requeue_own(sessions: sessionmaker[Session], trial_id: str, owner: str) -> list[str]:
    return requeue(sessions, Trial.id == trial_id, Trial.owner == owner)


def cancelled_among(sessions: sessionmaker[Session], trial_ids: list[str]) -> list[str]:
    """Those of these trials whose job was cancelled (maybe by another control plane)."""
    with reading(sessions) as session:
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


def job_to_run(session: Session, job_id: str) -> Job:
    job = session.get(Job, job_id)
    assert job is not None
    return job


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
