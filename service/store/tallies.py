"""Per-job tallies that a report would otherwise read every trial's wide row for: each
judge's passes over a variant's scored trials, and the models the answers named.

They are kept like the counts (`counts`): added to in the transaction that records a
trial's end, under the job's counts lock, so writers of one job take turns and a report of
a 100,000-trial job reads a few rows instead of unpacking 100,000 JSON lists of judges.
A judge counts a trial that `verdict` scores (only unscored outcomes are retried, so a scored
attempt is its planned trial's last), as `reports.judge_counts` counts them from the trials.

A job is `tallied` when its rows have been kept since it was submitted. One stored before
them, or by a bulk load, is tallied from its trials the first time its counts are recounted
(`recount`); until then its report counts from the trials.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping

from sqlalchemy import delete, insert, select, update
from sqlalchemy.orm import Session

from service.domain.outcomes import verdict
from service.store.models import JobCounts, JobTally, Trial
from service.store.reports import judge_counts

JUDGE = "judge"
MODEL = "model"

# (kind, variant, name) -> (passed, count)
Tallies = Mapping[tuple[str, str, str], tuple[int, int]]


def of_trial(trial: Trial) -> dict[tuple[str, str, str], tuple[int, int]]:
    """What the end of `trial` adds to its job's tallies."""
    found: dict[tuple[str, str, str], tuple[int, int]] = {}
    if trial.model_returned:
        found[(MODEL, "", trial.model_returned)] = (0, 1)
    if verdict(trial.status, trial.outcome, trial.error_kind) is not None:
        for judge in trial.judges or ():
            name = judge.get("name")
            if name is None:
                continue
            passed, count = found.get((JUDGE, trial.variant, name), (0, 0))
            score = judge.get("score")
            passed += int(score is not None and float(score) >= 1.0)
            found[(JUDGE, trial.variant, name)] = (passed, count + 1)
    return found


def add(session: Session, job_id: str, tallies: Tallies) -> None:
    """Add to the job's tallies, in a transaction that holds its counts lock (`counts.lock`):
    so the UPDATE that finds no row and the INSERT after it cannot race another writer."""
    for (kind, variant, name), (passed, count) in tallies.items():
        key = (
            JobTally.job_id == job_id,
            JobTally.kind == kind,
            JobTally.variant == variant,
            JobTally.name == name,
        )
        changed = session.execute(
            update(JobTally)
            .where(*key)
            .values(passed=JobTally.passed + passed, count=JobTally.count + count)
        )
        if not changed.rowcount:  # type: ignore[attr-defined]
            session.execute(
                insert(JobTally).values(
                    job_id=job_id, kind=kind, variant=variant, name=name, passed=passed, count=count
                )
            )


def recount(session: Session, job_id: str) -> None:
    """Tally the job afresh from its trials, and mark it tallied (its counts row exists and
    is locked: `counts.recount`)."""
    counted: Counter[tuple[str, str, str]] = Counter()
    passes: Counter[tuple[str, str, str]] = Counter()
    for variant, name, passed, scored in judge_counts(session, job_id):
        counted[(JUDGE, variant, name)] += scored
        passes[(JUDGE, variant, name)] += passed
    models = select(Trial.model_returned).where(
        Trial.job_id == job_id, Trial.model_returned.is_not(None)
    )
    for model in session.scalars(models):
        if model:
            counted[(MODEL, "", model)] += 1
    session.execute(delete(JobTally).where(JobTally.job_id == job_id))
    add(session, job_id, {key: (passes[key], n) for key, n in counted.items()})
    session.execute(update(JobCounts).where(JobCounts.job_id == job_id).values(tallied=True))


def read(session: Session, job_id: str) -> list[tuple[str, str, str, int, int]] | None:
    """(kind, variant, name, passed, count) of a tallied job, None for one that is not."""
    if not session.scalar(select(JobCounts.tallied).where(JobCounts.job_id == job_id)):
        return None
    rows = session.execute(
        select(JobTally.kind, JobTally.variant, JobTally.name, JobTally.passed, JobTally.count)
        .where(JobTally.job_id == job_id)
        .order_by(JobTally.kind, JobTally.variant, JobTally.name)
    )
    return [(kind, variant, name, passed, count) for kind, variant, name, passed, count in rows]


def judges_of(rows: Iterable[tuple[str, str, str, int, int]]) -> list[tuple[str, str, int, int]]:
    """`judge_counts`' rows, (variant, judge, passed, scored), of `read`'s."""
    return [(v, name, passed, n) for kind, v, name, passed, n in rows if kind == JUDGE]


def models_of(rows: Iterable[tuple[str, str, str, int, int]]) -> list[str]:
    """`models_returned`' list of `read`'s rows."""
    return sorted(name for kind, _, name, _, n in rows if kind == MODEL and n > 0)
