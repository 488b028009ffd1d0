"""A job's trial counts and change marker (`JobCounts`), kept by the store.

Every change of a trial's status changes its job's counts in the same transaction, by a
relative UPDATE (`col = col + delta`), so concurrent control planes add up rather than
overwrite each other, and reading a job costs one row however many trials it has. The
version rises with each change and is written on the trials that changed (`Trial.changed`),
so a reader that saw version v reads only the trials changed since.

The counts row is also the job's lock: a transaction that changes a job's trials raises
its version first (`lock`, before it touches the job's row or its trials), which gives it
the version its change has before it writes a trial, and one order of locks to every
writer on PostgreSQL (no deadlock between a claim, a result and a cancel of one job).

Counts are by each planned trial's latest attempt: `finished` and the outcomes count a
trial once, when its last attempt ended; `attempts` counts every row.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import insert, select, update
from sqlalchemy.orm import Session

from service.domain.status import TrialStatus
from service.store import tallies
from service.store.models import JobCounts, Trial

FIELDS = ("attempts", "queued", "running", "finished", "passed", "failed", "error")


@dataclass(frozen=True)
class Counts:
    attempts: int
    queued: int
    running: int
    finished: int
    passed: int
    failed: int
    error: int
    version: int

    def as_dict(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in FIELDS}

    @property
    def settled(self) -> bool:
        """Nothing is queued or running, and nothing will be: a retry is queued only as a
        running trial ends."""
        return self.queued == 0 and self.running == 0


def contribution(status: str, outcome: str | None) -> Counter[str]:
    """What one planned trial whose latest attempt is (status, outcome) adds to the counts
    (its attempt row itself is counted apart, in `attempts`)."""
    counted: Counter[str] = Counter({status: 1})
    if status == TrialStatus.FINISHED and outcome:
        counted[outcome] += 1
    return counted


def start(session: Session, job_id: str, queued: int) -> None:
    """The counts row of a new job with `queued` planned trials."""
    session.execute(
        insert(JobCounts).values(
            job_id=job_id,
            attempts=queued,
            queued=queued,
            running=0,
            finished=0,
            passed=0,
            failed=0,
            error=0,
            version=1,
            tallied=True,  # its tallies are kept from the start (`tallies`)
        )
    )


def lock(session: Session, job_ids: Iterable[str]) -> dict[str, int]:
    """Raise the jobs' versions, one job at a time in id order (as every writer does), and
    return them: the version this transaction's change has, to write on the trials it
    changes before it `add`s its deltas. The UPDATE is the lock: the row stays locked (on
    SQLite, the whole store is this transaction's to write) until the transaction ends. A
    job stored without a counts row (a bulk load) is counted first."""
    versions: dict[str, int] = {}
    for job_id in sorted(set(job_ids)):
        version = session.scalar(
            update(JobCounts)
            .where(JobCounts.job_id == job_id)
            .values(version=JobCounts.version + 1)
            .returning(JobCounts.version)
        )
        versions[job_id] = int(version) if version is not None else recount(session, job_id).version
    return versions


def add(session: Session, job_id: str, deltas: Mapping[str, int]) -> None:
    """Add `deltas` to the job's counts, in the transaction that `lock`ed them."""
    if changes := _changes(deltas):
        session.execute(update(JobCounts).where(JobCounts.job_id == job_id).values(**changes))


def _changes(deltas: Mapping[str, int]) -> dict[str, Any]:
    return {name: getattr(JobCounts, name) + delta for name, delta in deltas.items() if delta}


def add_and_read(session: Session, job_id: str, deltas: Mapping[str, int]) -> Counts | None:
    """`add`, and the counts it left, in one statement (RETURNING): what a trial's end needs
    to know whether its job is settled."""
    changes = _changes(deltas)
    if not changes:
        return read(session, job_id)
    row = session.execute(
        update(JobCounts)
        .where(JobCounts.job_id == job_id)
        .values(**changes)
        .returning(*(getattr(JobCounts, name) for name in (*FIELDS, "version")))
    ).first()
    return None if row is None else Counts(*row)


def read(session: Session, job_id: str) -> Counts | None:
    row = session.get(JobCounts, job_id, populate_existing=True)
    return None if row is None else _counts(row)


def _counts(row: JobCounts) -> Counts:
    return Counts(
        attempts=row.attempts,
        queued=row.queued,
        running=row.running,
        finished=row.finished,
        passed=row.passed,
        failed=row.failed,
        error=row.error,
        version=row.version,
    )


def read_many(session: Session, job_ids: Iterable[str]) -> dict[str, Counts]:
    rows = session.scalars(select(JobCounts).where(JobCounts.job_id.in_(list(job_ids))))
    return {row.job_id: _counts(row) for row in rows}


def version(session: Session, job_id: str) -> int | None:
    """The job's change marker: one indexed row, read before anything else of the job."""
    return session.scalar(select(JobCounts.version).where(JobCounts.job_id == job_id))


def count_trials(session: Session, job_id: str) -> dict[str, int]:
    """The counts worked out from the job's trials: what `recount` stores, and what the
    tests hold the kept counts to."""
    rows = session.execute(
        select(Trial.variant, Trial.order, Trial.attempt, Trial.status, Trial.outcome).where(
            Trial.job_id == job_id
        )
    ).all()
    latest: dict[tuple[str, int], tuple[int, str, str | None]] = {}
    for variant, order, attempt, status, outcome in rows:
        key = (variant, order)
        if key not in latest or attempt > latest[key][0]:
            latest[key] = (attempt, status, outcome)
    totals: Counter[str] = Counter()
    for _, status, outcome in latest.values():
        totals.update(contribution(status, outcome))
    return {"attempts": len(rows), **{name: totals[name] for name in FIELDS[1:]}}


def recount(session: Session, job_id: str) -> Counts:
    """Count the job's trials afresh into its row (creating it), with the row locked first
    so that no other transaction's relative update lands between the count and the write.
    For rare changes that are not a simple delta (a cancel dropping a job's queue), and for
    a job stored without its row."""
    locked = session.scalar(
        select(JobCounts.version).where(JobCounts.job_id == job_id).with_for_update()
    )
    counted = count_trials(session, job_id)
    if locked is None:
        session.execute(insert(JobCounts).values(job_id=job_id, **counted, version=1))
        new_version = 1
    else:
        new_version = int(locked) + 1
        session.execute(
            update(JobCounts)
            .where(JobCounts.job_id == job_id)
            .values(**counted, version=new_version)
        )
    tallies.recount(session, job_id)
    return Counts(**counted, version=new_version)


def forget(session: Session, job_id: str, dropped: Sequence[tuple[str, int, int, str]]) -> None:
    """Count out deleted attempts that had not ended, given as (variant, order, attempt,
    status) of rows already deleted: where one was a retry, the attempt before it is its
    planned trial's latest again, and counts as it ended."""
    deltas: Counter[str] = Counter()
    for variant, order, attempt, status in dropped:
        deltas["attempts"] -= 1
        deltas[status] -= 1
        previous = session.execute(
            select(Trial.status, Trial.outcome)
            .where(
                Trial.job_id == job_id,
                Trial.variant == variant,
                Trial.order == order,
                Trial.attempt < attempt,
            )
            .order_by(Trial.attempt.desc())
            .limit(1)
        ).first()
        if previous is not None:
            deltas.update(contribution(previous.status, previous.outcome))
    if deltas:
        add(session, job_id, dict(deltas))
