"""The judge and model tallies the store keeps per job (`service.store.tallies`): equal to
counting them from the trials (`reports.judge_counts`, `reports.models_returned`) after two
control planes finished a job at once with retries, on SQLite and PostgreSQL; a job stored
without them is counted from its trials until its counts are recounted; and the report is
the same either way."""

from __future__ import annotations

import threading

from sqlalchemy import delete, update
from sqlalchemy.orm import Session, sessionmaker

from sandbox.protocol import JudgeScore, TrialResult
from service.launch.trial import TrialRecord
from service.report.from_store import clear_report_cache, job_report
from service.store import counts, tallies
from service.store.models import Job, JobCounts, JobTally
from service.store.reports import judge_counts, models_returned
from tests.store.conftest import make_scheduler, submit


def _result(trial_id: str) -> TrialResult:
    """A result that depends on the trial's id: every kind of end, with judges and models."""
    draw = int(trial_id[-6:], 16)
    model = f"simulated/model-{draw % 3}"
    judges = [
        JudgeScore("trace", float(draw % 2), "t"),
        JudgeScore("facts", 1.0 if draw % 3 else 0.5, "f"),
        JudgeScore(f"only-{draw % 4}", 1.0),
    ]
    kind = draw % 7
    if kind == 0:  # ours: retried, its judges counted nowhere, its model counted
        return TrialResult("error", error_kind="infra_error", judges=judges, model_returned=model)
    if kind == 1:  # the agent's: scored as a failure, its judges counted
        return TrialResult("error", error_kind="timeout", judges=judges, model_returned=model)
    if kind == 2:  # the judge model's: not scored (retried, then kept as unscored)
        return TrialResult("error", error_kind="judge_error", judges=judges)
    outcome = "passed" if kind % 2 else "failed"
    return TrialResult(outcome, score=float(kind % 2), judges=judges, model_returned=model)


def _plane(sessions: sessionmaker[Session], name: str) -> None:
    plane = make_scheduler(sessions, owner=f"tests:{name}:tallies")
    try:
        while claimed := plane.claim(3):
            for trial_id, _ in claimed:
                plane.record(trial_id, TrialRecord(trial_id, _result(trial_id)))
    finally:
        plane.stop()


def _finished_by_two_planes(sessions: sessionmaker[Session]) -> str:
    job = submit(sessions, rounds=8, max_infra_retries=1)  # 32 planned trials
    planes = [threading.Thread(target=_plane, args=(sessions, name)) for name in ("a", "b")]
    for plane in planes:
        plane.start()
    for plane in planes:
        plane.join(timeout=240)
    assert not any(plane.is_alive() for plane in planes)
    return job.id


def _counted(session: Session, job_id: str) -> tuple[list[tuple[str, str, int, int]], list[str]]:
    return sorted(judge_counts(session, job_id)), models_returned(session, job_id)


def _kept(session: Session, job_id: str) -> tuple[list[tuple[str, str, int, int]], list[str]]:
    rows = tallies.read(session, job_id)
    assert rows is not None, "the job is not tallied"
    return sorted(tallies.judges_of(rows)), tallies.models_of(rows)


def test_kept_tallies_equal_the_trials_counted_after_two_planes_at_once(
    sessions: sessionmaker[Session],
) -> None:
    job_id = _finished_by_two_planes(sessions)
    with sessions() as session:
        judges, models = _kept(session, job_id)
        assert (judges, models) == _counted(session, job_id)
    # Every judge name was scored somewhere, and an infra error's model is among those named.
    assert {name for _, name, _, _ in judges} >= {"trace", "facts"}
    assert all(0 <= passed <= scored for _, _, passed, scored in judges)
    assert models and all(m.startswith("simulated/model-") for m in models)


def test_a_job_stored_without_tallies_reports_the_same_and_is_tallied_when_recounted(
    sessions: sessionmaker[Session],
) -> None:
    job_id = _finished_by_two_planes(sessions)
    with sessions() as session:
        kept = job_report(session, session.get_one(Job, job_id))
    # As a job stored before the tallies (or by a bulk load) has it: none kept, not tallied.
    with sessions.begin() as session:
        session.execute(delete(JobTally).where(JobTally.job_id == job_id))
        session.execute(update(JobCounts).where(JobCounts.job_id == job_id).values(tallied=False))
    clear_report_cache()
    with sessions() as session:
        assert tallies.read(session, job_id) is None
        counted = job_report(session, session.get_one(Job, job_id))
    assert counted.variants == kept.variants and counted.variants[0].judges
    assert counted.record.models_returned == kept.record.models_returned != []
    with sessions.begin() as session:
        counts.recount(session, job_id)
    with sessions() as session:
        assert _kept(session, job_id) == _counted(session, job_id)
