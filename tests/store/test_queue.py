"""The scheduler's queue in the store: claims, retries, requeue and recovery, job status."""

from __future__ import annotations

import contextlib
import functools
import json
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import Engine, event, func, select
from sqlalchemy.orm import Session, sessionmaker

from sandbox.protocol import EventMessage, LifecycleEvent, ResultMessage, TrialResult
from service.backends.fake import FakeBackend, FakeWorker
from service.launch.trial import TrialRecord
from service.scheduler import EventSink, Scheduler
from service.store import queue
from service.store.models import Artifact, Job, Plane, Trial
from service.store.models import Event as EventRow
from service.store.planes import STALE_AFTER_S, beat
from service.teams import create_team
from tests.store.conftest import SMOKE, make_scheduler, submit

PASSED = TrialResult("passed", score=1.0)
INFRA = TrialResult("error", error_kind="infra_error", error_message="no container")


def _ids(claimed: list[tuple[str, str]]) -> list[str]:
    return [trial_id for trial_id, _ in claimed]


def _job_status(sessions: sessionmaker[Session], job_id: str) -> str | None:
    with sessions() as session:
        return session.scalar(select(Job.status).where(Job.id == job_id))


def _trials(sessions: sessionmaker[Session], job_id: str) -> list[Trial]:
    with sessions() as session:
        return list(
            session.scalars(
                select(Trial).where(Trial.job_id == job_id).order_by(Trial.order, Trial.attempt)
            )
        )


def _job(sessions: sessionmaker[Session], job_id: str) -> Job:
    with sessions() as session:
        job = session.get(Job, job_id)
        assert job is not None
        return job


def test_claims_follow_job_then_plan_order(
    sessions: sessionmaker[Session], scheduler: Scheduler
) -> None:
    first = submit(sessions, rounds=2)
    second = submit(sessions)
    planned_first = [t.id for t in _trials(sessions, first.id)]
    planned_second = [t.id for t in _trials(sessions, second.id)]
    assert [t.order for t in _trials(sessions, first.id)] == list(range(2 * len(SMOKE)))

    assert _ids(scheduler.claim(3)) == planned_first[:3]
    assert (_job(sessions, first.id).status, _job(sessions, second.id).status) == (
        "running",
        "queued",
    )
    rest = scheduler.claim(100)
    assert _ids(rest) == planned_first[3:] + planned_second
    assert {job for _, job in rest} == {first.id, second.id}
    assert scheduler.claim(100) == []
    for trial in _trials(sessions, first.id) + _trials(sessions, second.id):
        assert (trial.status, trial.owner) == ("running", scheduler.owner)
        assert trial.started_at is not None


def test_infra_errors_queue_a_new_attempt_in_the_same_place(
    sessions: sessionmaker[Session], scheduler: Scheduler
) -> None:
    job = submit(sessions, cases=["create-greeting", "fix-config"], max_infra_retries=1)
    first, second = _ids(scheduler.claim(2))
    scheduler.record(first, TrialRecord(first, INFRA))
    # The retry keeps the plan position, so it runs before anything planned after it.
    [(retry, _)] = scheduler.claim(1)
    rows = {t.id: t for t in _trials(sessions, job.id)}
    assert (rows[retry].order, rows[retry].attempt) == (rows[first].order, 2)
    scheduler.record(second, TrialRecord(second, PASSED))
    assert _job(sessions, job.id).status == "running"
    scheduler.record(retry, TrialRecord(retry, INFRA))  # past max_infra_retries: kept as is
    assert scheduler.claim(10) == []
    assert _job(sessions, job.id).status == "finished"
    outcomes = [(t.order, t.attempt, t.error_kind) for t in _trials(sessions, job.id)]
    assert outcomes == [(0, 1, "infra_error"), (0, 2, "infra_error"), (1, 1, None)]


def test_a_locked_trial_is_skipped_not_waited_for(
    database_url: str, sessions: sessionmaker[Session], scheduler: Scheduler
) -> None:
    """FOR UPDATE OF trials SKIP LOCKED, with the join, order and limit the claim uses: a
    claimer passes over the rows another claimer's open transaction holds."""
    if not database_url.startswith("postgresql"):
        pytest.skip("SQLite has no row locks; test_claim_processes covers it")
    job = submit(sessions)
    planned = [t.id for t in _trials(sessions, job.id)]
    with sessions.begin() as other:
        held = other.scalars(
            select(Trial.id)
            .join(Job, Job.id == Trial.job_id)
            .order_by(Job.created_at, Trial.order)
            .limit(2)
            .with_for_update(skip_locked=True, of=Trial)
        ).all()
        assert list(held) == planned[:2]
        assert _ids(scheduler.claim(4)) == planned[2:]
    assert _ids(scheduler.claim(4)) == planned[:2]


def _dead_owner() -> str:
    """An owner label naming a process of this host that has exited."""
    process = subprocess.Popen(["true"])
    process.wait()
    return f"{socket.gethostname()}:{process.pid}:gone"


def test_recovery_queues_interrupted_trials_again_without_their_transcripts(
    sessions: sessionmaker[Session], scheduler: Scheduler
) -> None:
    job = submit(sessions)
    died = make_scheduler(sessions, owner=_dead_owner())
    try:
        done, interrupted, also_interrupted = _ids(died.claim(3))
        for trial_id in (done, interrupted, also_interrupted):
            sink = EventSink(sessions, trial_id)
            for n in range(5):
                sink(LifecycleEvent(step=f"step-{n}"))
            sink.flush()
        died.record(done, TrialRecord(done, PASSED, artifacts={"session.jsonl": b"{}\n"}))
    finally:
        died.stop()
    with sessions.begin() as session:
        session.add(Artifact(trial_id=interrupted, name="partial", sha256="0", size=0, content=b""))

    # A new control plane on the same store, after that one died.
    scheduler.recover()
    rows = {t.id: t for t in _trials(sessions, job.id)}
    for trial_id in (interrupted, also_interrupted):
        row = rows[trial_id]
        assert (row.status, row.owner, row.started_at) == ("queued", None, None)
    assert rows[done].status == "finished"
    with sessions() as session:
        events = session.execute(
            select(EventRow.trial_id, func.count()).group_by(EventRow.trial_id)
        ).all()
        artifacts = session.scalars(select(Artifact.trial_id)).all()
    assert dict(events) == {done: 5}
    assert list(artifacts) == [done]
    # They run again first, in plan order, as new runs of the same attempt.
    assert _ids(scheduler.claim(2)) == [interrupted, also_interrupted]
    assert {t.attempt for t in _trials(sessions, job.id)} == {1}


@contextlib.contextmanager
def _meeting(engine: Engine, marks: tuple[str, ...]) -> Iterator[None]:
    """Hold each of two threads just before the statement containing all of `marks` until
    the other gets there too: the race at its widest. Where the database makes one wait for
    the other (a lock), the first goes on alone after a few seconds."""
    both_there = threading.Barrier(2)

    def meet(_c: Any, _cur: Any, statement: str, *_args: Any) -> None:
        if all(mark in statement for mark in marks):
            with contextlib.suppress(threading.BrokenBarrierError):
                both_there.wait(timeout=3)

    event.listen(engine, "before_cursor_execute", meet)
    try:
        yield
    finally:
        event.remove(engine, "before_cursor_execute", meet)


def _together(*calls: Callable[[], object]) -> None:
    threads = [threading.Thread(target=call) for call in calls]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)


def test_two_trials_finishing_at_once_finish_their_job(
    engine: Engine, sessions: sessionmaker[Session], scheduler: Scheduler
) -> None:
    """The last two trials of a job end together (two threads here; two control planes
    alike): whichever commits second must see the job has nothing open and finish it."""
    job = submit(sessions, cases=["create-greeting", "fix-config"])
    first, second = _ids(scheduler.claim(2))
    with _meeting(engine, ("job_counts.version",)):
        _together(
            *(
                functools.partial(scheduler.record, t, TrialRecord(t, PASSED))
                for t in (first, second)
            )
        )
    assert [t.status for t in _trials(sessions, job.id)] == ["finished", "finished"]
    assert _job(sessions, job.id).status == "finished"


def test_a_jobs_concurrency_bounds_its_running_trials_and_no_other_job(
    sessions: sessionmaker[Session], scheduler: Scheduler
) -> None:
    held = submit(sessions, rounds=2, concurrency=2)
    other = submit(sessions)
    held_ids = [t.id for t in _trials(sessions, held.id)]
    assert _job(sessions, held.id).concurrency == 2

    # The held job is older, yet its 8 queued trials take 2 slots and the rest go to the next.
    first = scheduler.claim(100)
    assert _ids(first) == held_ids[:2] + [t.id for t in _trials(sessions, other.id)]
    assert scheduler.claim(100) == []
    # A slot of its own frees as one of its trials ends, and only one.
    scheduler.record(held_ids[0], TrialRecord(held_ids[0], PASSED))
    assert _ids(scheduler.claim(100)) == [held_ids[2]]
    # A retried trial (an infra error) is queued again within the same bound.
    scheduler.record(held_ids[1], TrialRecord(held_ids[1], INFRA))
    retried = scheduler.claim(100)
    assert len(retried) == 1 and retried[0][1] == held.id
    assert [t.status for t in _trials(sessions, held.id)].count("running") == 2


def test_a_jobs_concurrency_and_its_teams_cap_bind_together(
    sessions: sessionmaker[Session], scheduler: Scheduler
) -> None:
    with sessions.begin() as session:
        team_id = create_team(session, "three", max_containers=3).id
    bounded = submit(sessions, rounds=2, concurrency=2)
    free = submit(sessions, rounds=2)
    with sessions.begin() as session:
        for job in (bounded, free):
            session.get_one(Job, job.id).team_id = team_id

    claimed = scheduler.claim(100)
    # Three slots for the team: the older job's two, then one of the other's.
    assert [job for _, job in claimed] == [bounded.id, bounded.id, free.id]
    assert scheduler.claim(100) == []


def test_a_teams_room_for_the_warm_pool_is_what_the_claim_would_leave_it(
    sessions: sessionmaker[Session], scheduler: Scheduler
) -> None:
    """What the pool may hold for a capped team (service/backends/pool_keeper.py): its cap
    less every plane's running trials of it and this plane's listings of it."""
    with sessions.begin() as session:
        capped = create_team(session, "capped", max_containers=3).id
        create_team(session, "free")
    job = submit(sessions, cases=["create-greeting", "fix-config"])
    with sessions.begin() as session:
        session.get_one(Job, job.id).team_id = capped
    assert scheduler.team_room() == {capped: 3}  # an uncapped team is not named
    peer = make_scheduler(sessions, owner="tests:2:peer")
    try:
        assert len(peer.claim(1)) == 1
        assert scheduler.reserve_listing(capped)
        assert scheduler.team_room() == {capped: 1}
        scheduler.release_listing(capped)
        assert scheduler.team_room() == {capped: 2}
    finally:
        peer.stop()


def _claim_into(claimed: list[list[tuple[str, str]]], plane: Scheduler) -> None:
    claimed.append(plane.claim(2))


def test_two_control_planes_claiming_at_once_keep_a_teams_cap(
    engine: Engine, sessions: sessionmaker[Session]
) -> None:
    with sessions.begin() as session:
        team = create_team(session, "capped", max_containers=1)
        team_id = team.id
    job = submit(sessions, cases=["create-greeting", "fix-config"])
    with sessions.begin() as session:
        session.get_one(Job, job.id).team_id = team_id
    planes = [make_scheduler(sessions, owner=f"tests:{n}:plane") for n in (1, 2)]
    claimed: list[list[tuple[str, str]]] = []
    try:
        # Both count the team's running trials (none) before either claims.
        with _meeting(engine, ("count(*)", "trials.status =")):
            _together(*(functools.partial(lambda p: claimed.append(p.claim(2)), p) for p in planes))
        assert sorted(len(c) for c in claimed) == [0, 1]
    finally:
        for plane in planes:
            plane.stop()


def test_a_control_plane_starting_beside_a_live_one_leaves_its_trials_alone(
    sessions: sessionmaker[Session],
) -> None:
    submit(sessions, cases=["create-greeting"])
    # A live peer on another host: only its heartbeat says it is alive.
    peer = make_scheduler(sessions, owner="elsewhere:7:peer")
    starting = make_scheduler(sessions, owner="tests:3:starting")
    try:
        beat(sessions, peer.owner)
        [(trial_id, _)] = peer.claim(1)
        starting.recover()
        with sessions() as session:
            trial = session.get(Trial, trial_id)
            assert trial is not None
            assert (trial.status, trial.owner) == ("running", peer.owner)
    finally:
        peer.stop()
        starting.stop()


def test_a_peer_that_stopped_beating_has_its_trials_taken_over(
    sessions: sessionmaker[Session], scheduler: Scheduler
) -> None:
    job = submit(sessions, cases=["create-greeting", "fix-config"])
    peer = make_scheduler(sessions, owner="elsewhere:7:peer")
    beat(sessions, peer.owner)
    claimed = _ids(peer.claim(2))
    # Its last beat is older than the window: presumed gone, though on another host.
    with sessions.begin() as session:
        plane = session.get(Plane, peer.owner)
        assert plane is not None
        plane.seen_at -= timedelta(seconds=STALE_AFTER_S + 1)

    scheduler.recover()
    assert [(t.status, t.owner) for t in _trials(sessions, job.id)] == [("queued", None)] * 2
    # The peer was only slow: its late result for a trial it no longer owns is dropped, and
    # the plane that took the trials over runs them.
    peer.record(claimed[0], TrialRecord(claimed[0], PASSED))
    assert [t.status for t in _trials(sessions, job.id)] == ["queued", "queued"]
    assert _ids(scheduler.claim(2)) == claimed
    for trial_id in claimed:
        scheduler.record(trial_id, TrialRecord(trial_id, PASSED))
    assert [t.owner for t in _trials(sessions, job.id)] == [scheduler.owner] * 2
    assert _job(sessions, job.id).status == "finished"


def test_a_job_runs_through_the_scheduler_on_a_fake_backend(
    sessions: sessionmaker[Session],
) -> None:
    """The scheduler's whole trial life with no engine: claimed, launched, its events taken
    in, its end recorded, an infra error retried, the job finished."""
    silent_once: set[str] = set()

    def worker(w: FakeWorker) -> int:
        spec = json.loads(w.request)["spec"]
        key = f"{spec['case_id']}/{spec['round']}"
        if spec["case_id"] == "fix-config" and key not in silent_once:
            silent_once.add(key)
            return 1  # ended with no result: from outside, so a retry
        for seq in (1, 2):
            w.say(EventMessage(seq, LifecycleEvent("agent", f"{key} #{seq}")))
        w.say(ResultMessage(TrialResult("passed", score=1.0)))
        return 0

    job = submit(sessions, cases=["create-greeting", "fix-config"], rounds=2)
    changed: list[str] = []
    plane = Scheduler(sessions, FakeBackend(worker), max_containers=2, poll_s=0.02)
    plane.on_change = changed.append
    plane.start()
    try:
        deadline = time.monotonic() + 30
        while _job_status(sessions, job.id) != "finished":
            assert time.monotonic() < deadline, "the job did not finish"
            time.sleep(0.05)
    finally:
        plane.stop()
    trials = _trials(sessions, job.id)
    attempts = sorted((t.case_id, t.round, t.attempt, t.error_kind) for t in trials)
    assert attempts == [
        ("create-greeting", 1, 1, None),
        ("create-greeting", 2, 1, None),
        ("fix-config", 1, 1, "infra_error"),
        ("fix-config", 1, 2, None),
        ("fix-config", 2, 1, "infra_error"),
        ("fix-config", 2, 2, None),
    ]
    with sessions() as session:
        passed = [t for t in trials if t.outcome == "passed"]
        for t in passed:
            details = session.scalars(
                select(EventRow.payload).where(EventRow.trial_id == t.id).order_by(EventRow.seq)
            ).all()
            assert [d["detail"] for d in details] == [f"{t.case_id}/{t.round} #{n}" for n in (1, 2)]
            names = session.scalars(select(Artifact.name).where(Artifact.trial_id == t.id)).all()
            assert names == ["session.jsonl"]
    assert set(changed) == {job.id} and len(changed) == 6


def test_a_claim_whose_answer_was_lost_is_queued_again(
    sessions: sessionmaker[Session], scheduler: Scheduler
) -> None:
    """The store committed the claim, but the connection dropped before the plane heard
    (its server restarting): the trial is the plane's, running, yet not run. The next
    recovery pass queues it again; the trials the plane does run are left alone."""
    job = submit(sessions)
    kept = _ids(scheduler.claim(1))
    # as the lost answer left it
    lost = [c.trial_id for c in queue.claim(sessions, scheduler.owner, 1, [])]
    with scheduler._lock:
        scheduler._running.update(dict.fromkeys(kept, job.id))
    scheduler.recover()
    with sessions() as session:
        rows = session.execute(select(Trial.id, Trial.status))
        status = {trial_id: state for trial_id, state in rows}
    assert [status[t] for t in kept + lost] == ["running", "queued"]
    assert _ids(scheduler.claim(10))[0] == lost[0]
