"""Trials' ends written together (service/scheduler/result_writer.py), on SQLite and
PostgreSQL: every end of a busy plane recorded exactly once with its job's counts and
tallies kept as a recount finds them, in fewer transactions than ends; an infra error among
them queued again; and one end the store refuses fails alone."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from sqlalchemy import Engine, event, func, select, text
from sqlalchemy.orm import Session, sessionmaker

from sandbox.protocol import JudgeScore, LifecycleEvent, TrialResult
from service.scheduler import Scheduler
from service.store import counts, tallies
from service.store.models import Artifact, Event, Job, Trial
from service.store.results import Ended
from tests.store.conftest import submit

PASSED = TrialResult("passed", score=1.0)
INFRA = TrialResult("error", error_kind="infra_error", error_message="the node went away")


def _judged(n: int) -> TrialResult:
    """A scored end whose judges and model differ from trial to trial, so that the tallies
    of a transaction's ends are sums of different things."""
    return TrialResult(
        "passed" if n % 3 else "failed",
        score=1.0 if n % 3 else 0.0,
        judges=[JudgeScore("exact", float(n % 3 > 0)), JudgeScore("length", float(n % 2))],
        model_returned=f"model-{n % 2}",
    )


def _end(trial_id: str, result: TrialResult = PASSED, events: int = 0) -> Ended:
    """The trial's end, with its last `events` (seq 1 up) still to write."""
    tail = [(seq, LifecycleEvent("step", trial_id)) for seq in range(1, events + 1)]
    return Ended(trial_id, result, {"log.txt": trial_id.encode()}, None, 0.5, None, events=tail)


def _events(sessions: sessionmaker[Session]) -> dict[str, list[tuple[int, str]]]:
    """Every stored event, per trial: (seq, the detail its payload holds)."""
    stored: dict[str, list[tuple[int, str]]] = {}
    with sessions() as session:
        rows = session.execute(select(Event.trial_id, Event.seq, Event.payload))
        for trial_id, seq, payload in sorted(rows, key=lambda r: (r[0], r[1])):
            stored.setdefault(trial_id, []).append((seq, payload["detail"]))
    return stored


def _write_together(scheduler: Scheduler, ends: list[Ended]) -> list[Any]:
    """Each trial's end from a thread of its own, all at once, as a plane's slots end: each
    thread's job id, or the error it raised."""
    start = threading.Barrier(len(ends))

    def one(ended: Ended) -> Any:
        start.wait()
        try:
            return scheduler.results.write(ended)
        except Exception as exc:
            return exc

    with ThreadPoolExecutor(len(ends)) as pool:
        return list(pool.map(one, ends))


def _commits(engine: Engine) -> Callable[[], int]:
    seen = [0]

    def counted(_connection: Any) -> None:
        seen[0] += 1

    event.listen(engine, "commit", counted)
    return lambda: seen[0]


def test_a_busy_planes_ends_are_each_recorded_once_in_fewer_transactions(
    engine: Engine, sessions: sessionmaker[Session], scheduler: Scheduler
) -> None:
    job = submit(sessions, rounds=6)  # 24 trials
    claimed = [c.trial_id for c in scheduler.claim(24)]
    assert len(claimed) == 24
    commits = _commits(engine)
    answers = _write_together(scheduler, [_end(t, _judged(n)) for n, t in enumerate(claimed)])
    assert answers == [job.id] * 24
    # One transaction per end would be 24; ends that arrive while one is written share the
    # next. Some threads start late on a loaded machine, so only "fewer" is certain.
    assert commits() < 24
    with sessions() as session:
        statuses = session.scalars(select(Trial.status).where(Trial.job_id == job.id)).all()
        artifacts = session.scalar(
            select(func.count()).select_from(Artifact).join(Trial).where(Trial.job_id == job.id)
        )
        kept = counts.read(session, job.id)
        finished = session.get(Job, job.id)
        tallied = tallies.read(session, job.id)
    with sessions.begin() as session:
        counts.recount(session, job.id)  # the tallies afresh from the trials, as stored
    with sessions() as session:
        afresh = tallies.read(session, job.id)
    assert sorted(statuses) == ["finished"] * 24
    assert artifacts == 24
    assert kept is not None and (kept.finished, kept.passed, kept.running) == (24, 16, 0)
    assert finished is not None and finished.status == "finished"
    assert tallied == afresh and tallied is not None
    exact = [row for row in tallied if row[0] == "judge" and row[2] == "exact"]
    assert [row[3:] for row in exact] == [(16, 24)], tallied
    # Written again (a plane retrying after a fault it thought lost the write): not ours now.
    assert scheduler.results.write(_end(claimed[0])) is None
    with sessions() as session:
        again = counts.read(session, job.id)
    assert again is not None and again.finished == 24


def test_a_trials_last_events_are_written_with_its_end_and_only_when_it_is_ours(
    engine: Engine, sessions: sessionmaker[Session], scheduler: Scheduler
) -> None:
    submit(sessions)  # 4 trials
    claimed = [c.trial_id for c in scheduler.claim(4)]
    commits = _commits(engine)
    for trial_id in claimed[:3]:
        scheduler.results.write(_end(trial_id, events=2))
    # The events and the end of each in one transaction: three commits for three trials.
    assert commits() == 3
    assert _events(sessions) == {t: [(1, t), (2, t)] for t in claimed[:3]}
    # The same end written again (not ours now): its events are dropped with it.
    assert scheduler.results.write(_end(claimed[0], events=3)) is None
    # A trial with nothing left to write: none of its events, and no empty write either.
    assert scheduler.results.write(_end(claimed[3])) is not None
    assert _events(sessions) == {t: [(1, t), (2, t)] for t in claimed[:3]}


@pytest.fixture
def refuse_one(engine: Engine) -> Callable[[str], None]:
    """A store that refuses to finish one trial: a trigger, as a constraint of its own would."""

    def refuse(trial_id: str) -> None:
        with engine.begin() as connection:
            if engine.dialect.name == "sqlite":
                connection.execute(
                    text(
                        "CREATE TRIGGER refuse_one BEFORE UPDATE OF status ON trials "
                        f"WHEN NEW.id = '{trial_id}' AND NEW.status = 'finished' "
                        "BEGIN SELECT RAISE(ABORT, 'this store refuses the end'); END"
                    )
                )
            else:
                connection.execute(
                    text(
                        "CREATE FUNCTION refuse_one() RETURNS trigger AS $$ BEGIN "
                        "RAISE EXCEPTION 'this store refuses the end'; END $$ LANGUAGE plpgsql"
                    )
                )
                connection.execute(
                    text(
                        "CREATE TRIGGER refuse_one BEFORE UPDATE ON trials FOR EACH ROW "
                        f"WHEN (NEW.id = '{trial_id}' AND NEW.status = 'finished') "
                        "EXECUTE FUNCTION refuse_one()"
                    )
                )

    return refuse


def test_an_end_the_store_refuses_fails_alone(
    sessions: sessionmaker[Session],
    scheduler: Scheduler,
    refuse_one: Callable[[str], None],
) -> None:
    job = submit(sessions, rounds=2)  # 8 trials
    claimed = [c.trial_id for c in scheduler.claim(8)]
    refused = claimed[3]
    refuse_one(refused)
    ends = [_end(trial_id, events=1) for trial_id in claimed]
    answers = dict(zip(claimed, _write_together(scheduler, ends), strict=True))
    assert "refuses the end" in str(answers.pop(refused))
    assert set(answers.values()) == {job.id}
    with sessions() as session:
        rows = {
            t.id: t.status for t in session.scalars(select(Trial).where(Trial.job_id == job.id))
        }
        kept = counts.read(session, job.id)
    assert rows.pop(refused) == "running"  # its thread records it as the plane's failure
    assert set(rows.values()) == {"finished"}
    assert kept is not None and (kept.finished, kept.running) == (7, 1)
    # The refused end's events went with it; every other end's were written once.
    assert _events(sessions) == {t: [(1, t)] for t in claimed if t != refused}


def test_infra_errors_among_ends_written_together_are_queued_again(
    sessions: sessionmaker[Session], scheduler: Scheduler
) -> None:
    job = submit(sessions, rounds=2)  # 8 trials
    claimed = [c.trial_id for c in scheduler.claim(8)]
    lost = set(claimed[::3])  # three of them: their sandboxes were lost
    ends = [_end(t, INFRA if t in lost else PASSED) for t in claimed]
    assert _write_together(scheduler, ends) == [job.id] * 8
    with sessions() as session:
        kept = counts.read(session, job.id)
        afresh = counts.count_trials(session, job.id)
        queued = session.scalars(
            select(Trial).where(Trial.job_id == job.id, Trial.status == "queued")
        ).all()
        status = session.scalar(select(Job.status).where(Job.id == job.id))
    assert kept is not None and {name: getattr(kept, name) for name in afresh} == afresh
    assert (kept.attempts, kept.queued, kept.finished, kept.passed) == (11, 3, 5, 5)
    assert sorted((t.order, t.attempt) for t in queued) == sorted(
        (t.order, 2) for t in _claimed_rows(sessions, lost)
    )
    assert status == "running"  # three attempts to run: not finished


def _claimed_rows(sessions: sessionmaker[Session], trial_ids: set[str]) -> list[Trial]:
    with sessions() as session:
        return list(session.scalars(select(Trial).where(Trial.id.in_(trial_ids))))
