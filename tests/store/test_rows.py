"""What the store keeps comes back the same on SQLite and PostgreSQL: transcripts, JSON
columns, bytes, and the report built from the rows."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import URL, select, text
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from sandbox.protocol import (
    Event,
    JudgeScore,
    LifecycleEvent,
    MessageEvent,
    ToolCall,
    ToolCallEvent,
    ToolResultEvent,
    TrialResult,
    Usage,
)
from service.domain.job_spec import JobRequest
from service.domain.planner import plan, resolve_design
from service.launch.trial import TrialRecord
from service.report.from_store import job_report
from service.scheduler import EVENT_BATCH, EventSink, Scheduler
from service.store import counts
from service.store.clock import now
from service.store.db import make_engine, migrate, session_factory
from service.store.jobs import StoredSuite, create_job, newest_jobs, start_built_job
from service.store.models import Artifact, Job, Suite, Trial
from service.store.models import Event as EventRow
from service.teams import create_team
from tests.store.conftest import SMOKE, fresh_postgres_database, make_scheduler, submit

ODD = 'naïve ✓ \U0001f9ea "quoted" \\ back\nslash\ttab'


def _transcript(n: int) -> list[Event]:
    kinds: list[Event] = [
        MessageEvent(
            role="assistant",
            content=ODD,
            tool_calls=[ToolCall("c1", "write", {"path": "a.txt", "lines": [1, 2.5, None]})],
            stop_reason="tool_use",
            model="sim-1",
            usage=Usage(10, 5, 1),
        ),
        ToolCallEvent(id="c1", name="write", arguments={"nested": {"deep": [True, False]}}),
        ToolResultEvent(tool_call_id="c1", name="write", content="ok", error=None),
        LifecycleEvent(step="judge", detail="x" * 5000),
    ]
    return [kinds[i % len(kinds)] for i in range(n)]


def test_events_are_written_in_batches_in_sequence(
    sessions: sessionmaker[Session], scheduler: Scheduler, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Only the batch size flushes here: a slow machine's time-based flush would shift the
    # batches this test counts.
    monkeypatch.setattr("service.scheduler.ingest.EVENT_FLUSH_S", 3600.0)
    submit(sessions, cases=["create-greeting", "fix-config"])
    trials = [trial_id for trial_id, _ in scheduler.claim(2)]
    sinks = [EventSink(sessions, trial_id) for trial_id in trials]
    events = _transcript(EVENT_BATCH + 250)
    for index, item in enumerate(events):
        sinks[0](item)
        if index % 3 == 0:
            sinks[1](item)
        if index == EVENT_BATCH:
            # A full batch is in the store while the trial runs, before any final flush.
            with sessions() as session:
                stored = session.scalars(
                    select(EventRow.seq).where(EventRow.trial_id == trials[0])
                ).all()
            assert len(stored) >= EVENT_BATCH
    for sink in sinks:
        sink.flush()
    with sessions() as session:
        rows = session.scalars(
            select(EventRow).where(EventRow.trial_id == trials[0]).order_by(EventRow.seq)
        ).all()
        other = session.scalars(select(EventRow.seq).where(EventRow.trial_id == trials[1])).all()
    assert [r.seq for r in rows] == list(range(1, len(events) + 1))
    assert [(r.type, r.payload) for r in rows] == [(e.type, dataclasses.asdict(e)) for e in events]
    assert sorted(other) == list(range(1, len(events[::3]) + 1))
    # One transcript, one sequence: a second writer of the same seq is refused.
    with pytest.raises(IntegrityError), sessions.begin() as session:
        session.add(EventRow(trial_id=trials[0], seq=1, type="lifecycle", payload={}))


def test_artifact_ids_go_past_32_bits(
    sessions: sessionmaker[Session], scheduler: Scheduler
) -> None:
    submit(sessions, cases=["create-greeting"])
    [(trial_id, _)] = scheduler.claim(1)
    past = 2**31
    with sessions.begin() as session:
        # Where the ids would stand after two billion artifacts: the next ones must still fit.
        # (Events have no id: they are keyed by trial and seq.)
        if session.get_bind().dialect.name == "postgresql":
            session.execute(text(f"ALTER SEQUENCE artifacts_id_seq RESTART WITH {past}"))
        else:
            session.add(
                Artifact(id=past - 1, trial_id=trial_id, name="-", sha256="", size=0, content=b"")
            )
    scheduler.record(
        trial_id, TrialRecord(trial_id, TrialResult("passed", score=1.0), artifacts={"a": b"x"})
    )
    with sessions() as session:
        artifact_id = session.scalar(select(Artifact.id).where(Artifact.name == "a"))
    assert artifact_id is not None and artifact_id >= past


def test_json_text_and_bytes_round_trip(
    database_url: str, sessions: sessionmaker[Session], scheduler: Scheduler
) -> None:
    job = submit(sessions, cases=["create-greeting"], seed=2**32 - 1, rounds=1000)
    trial_id, _ = scheduler.claim(1)[0]
    blob = bytes(range(256)) * 3
    result = TrialResult(
        "failed",
        score=0.5,
        judges=[JudgeScore("file", 1.0, ODD), JudgeScore("text", 0.0, "")],
        usage=Usage(1234, 56, 3, 7, 8),
        model_requested="simulated/coin?p=1",
        model_returned=ODD,
        tool_calls=2,
        final_text="before\x00after",
        limits_hit=["pids", "disk:/workspace"],
        timings={"run_agent": 1.25, "judge": 0.001, "bad": float("nan")},
    )
    record = TrialRecord(trial_id, result, artifacts={"session.jsonl": blob}, wall_s=2.5)
    record.cost_usd = 0.000123
    scheduler.record(trial_id, record)
    sink = EventSink(sessions, trial_id)
    sink(ToolCallEvent(id="c", name="x", arguments={"n": float("inf"), "nul": "a\x00b"}))
    sink.flush()

    with sessions() as session:
        stored_job = session.get(Job, job.id)
        trial = session.get(Trial, trial_id)
        artifact = session.scalar(select(Artifact).where(Artifact.trial_id == trial_id))
        payload = session.scalar(select(EventRow.payload).where(EventRow.trial_id == trial_id))
    assert stored_job is not None and trial is not None and artifact is not None
    assert stored_job.seed == 2**32 - 1 and stored_job.rounds == 1000
    assert stored_job.spec == job.spec
    assert stored_job.spec["variants"]["default"]["model"] == {
        "provider": "simulated",
        "id": "coin?p=1",
    }
    assert trial.judges == [
        {"name": "file", "score": 1.0, "detail": ODD, "rubric_sha256": None},
        {"name": "text", "score": 0.0, "detail": "", "rubric_sha256": None},
    ]
    assert trial.usage == {
        "input_tokens": 1234,
        "output_tokens": 56,
        "requests": 3,
        "cache_read_tokens": 7,
        "cache_write_tokens": 8,
        "cost_usd": 0.000123,
    }
    # Not a number is not JSON: stored as null on both, where PostgreSQL would refuse it.
    assert trial.timings == {"run_agent": 1.25, "judge": 0.001, "bad": None}
    # What a comparison's report reads of that JSON, kept as columns beside it.
    telemetry = (trial.input_tokens, trial.output_tokens, trial.latency_s, trial.cost_usd)
    assert telemetry == (1234, 56, 1.25, 0.000123)
    assert trial.limits_hit == ["pids", "disk:/workspace"]
    assert (trial.model_returned, trial.score, trial.wall_s) == (ODD, 0.5, 2.5)
    # PostgreSQL's text cannot hold NUL; JSON strings can, escaped.
    nul = "\ufffd" if database_url.startswith("postgresql") else "\x00"
    assert trial.final_text == f"before{nul}after"
    assert payload == {
        "id": "c",
        "name": "x",
        "arguments": {"n": None, "nul": "a\x00b"},
        "type": "tool_call",
    }
    assert (artifact.content, artifact.size) == (blob, len(blob))


@contextmanager
def _database(kind: str, tmp_path: Path, postgres: URL | None) -> Iterator[str]:
    if kind == "sqlite":
        yield f"sqlite:///{tmp_path / 'report.db'}"
    else:
        assert postgres is not None
        yield from fresh_postgres_database(postgres)


OUTCOMES: dict[int, TrialResult] = {
    0: TrialResult("passed", score=1.0, usage=Usage(100, 20, 2), tool_calls=2),
    1: TrialResult("failed", score=0.0, usage=Usage(90, 10, 1), tool_calls=1),
    2: TrialResult("error", error_kind="timeout", error_message="deadline"),
}


def _run_docs_lift_job(sessions: sessionmaker[Session]) -> dict[str, Any]:
    """A docs-lift job whose trials end by a fixed rule of (case, variant, round), with one
    infra error retried, stored through the scheduler as real trials are."""
    job = submit(
        sessions,
        comparison="docs-lift",
        docs={"files": {"guide.md": "# Guide\n"}},
        rounds=3,
        seed=11,
    )
    scheduler = make_scheduler(sessions)
    try:
        retried = False
        while claimed := scheduler.claim(5):
            for trial_id, _ in claimed:
                with sessions() as session:
                    trial = session.get(Trial, trial_id)
                    assert trial is not None
                case = SMOKE.index(trial.case_id)
                if not retried and trial.variant == "with_docs":
                    result = TrialResult("error", error_kind="infra_error", error_message="x")
                    retried = True
                elif trial.variant == "with_docs":
                    result = OUTCOMES[0 if (case + trial.round) % 4 else 1]
                else:
                    result = OUTCOMES[(case * trial.round) % 3]
                result = dataclasses.replace(
                    result,
                    model_returned="sim-1",
                    system_prompt_sha256=f"sha-{trial.variant}",
                    timings={"run_agent": 1.0 + case / 4 + trial.round / 8},
                )
                scheduler.record(trial_id, TrialRecord(trial_id, result, wall_s=1.5))
    finally:
        scheduler.stop()
    with sessions() as session:
        stored = session.get(Job, job.id)
        assert stored is not None and stored.status == "finished"
        return job_report(session, stored).model_dump(mode="json")


def _comparable(report: Any) -> Any:
    """The report without what differs between any two runs: ids and clocks."""
    if isinstance(report, dict):
        return {
            key: _comparable(value)
            for key, value in report.items()
            if key not in {"job", "generated_at", "submitted_at"}
        }
    if isinstance(report, list):
        return [_comparable(item) for item in report]
    return report


def test_the_report_from_rows_is_the_same_on_both(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    postgres: URL = request.getfixturevalue("postgres_server")
    reports = {}
    for kind in ("sqlite", "postgresql"):
        with _database(kind, tmp_path, postgres) as url:
            engine = make_engine(url)
            try:
                migrate(engine)
                reports[kind] = _run_docs_lift_job(session_factory(engine))
            finally:
                engine.dispose()
    assert _comparable(reports["sqlite"]) == _comparable(reports["postgresql"])
    report = reports["postgresql"]
    variants = {v["name"]: v["outcomes"] for v in report["variants"]}
    assert variants["without_docs"]["error_kinds"] == {"timeout": 2}
    assert (variants["with_docs"]["attempts"], variants["with_docs"]["retried_attempts"]) == (13, 1)
    [comparison] = report["comparisons"]
    assert comparison["pairs_eligible"] == 12 and comparison["headline"] is not None
    # The telemetry comes from the columns kept with each result: each arm's totals are
    # what its trials' results said, by the rule above (a timeout and the retried infra
    # error measured no tokens; every result timed its agent, the infra error's too).
    cells = [(case, round_) for case in range(len(SMOKE)) for round_ in (1, 2, 3)]
    rules = {
        "with_docs": [OUTCOMES[0 if (case + round_) % 4 else 1] for case, round_ in cells],
        "without_docs": [OUTCOMES[(case * round_) % 3] for case, round_ in cells],
    }
    runs = {cell: 1.0 + cell[0] / 4 + cell[1] / 8 for cell in cells}
    for arm, results in rules.items():
        totals = comparison["totals"][arm]
        usages = [r.usage for r in results if r.outcome != "error"]
        assert totals["tokens"]["total"] == sum(u.input_tokens + u.output_tokens for u in usages)
    assert comparison["totals"]["without_docs"]["latency_s"]["total"] == pytest.approx(
        sum(runs.values())
    )
    retried_run = comparison["totals"]["with_docs"]["latency_s"]["total"] - sum(runs.values())
    assert any(retried_run == pytest.approx(run) for run in runs.values())


def test_a_team_sees_its_own_jobs_and_an_admin_every_teams(
    sessions: sessionmaker[Session],
) -> None:
    with sessions.begin() as session:
        team = create_team(session, "scoped").id
    mine = submit(sessions, cases=["create-greeting"])
    with sessions.begin() as session:
        session.get(Job, mine.id).team_id = team  # type: ignore[union-attr]
    admins = submit(sessions, cases=["create-greeting"])
    with sessions() as session:
        assert [j.id for j in newest_jobs(session, team, 10)] == [mine.id]
        # No team is not "every team": it is the jobs submitted with an admin token.
        assert [j.id for j in newest_jobs(session, None, 10)] == [admins.id]
        everyone = newest_jobs(session, None, 10, every_team=True)
        assert {j.id for j in everyone} == {mine.id, admins.id}


def test_a_jobs_planned_trials_are_stored_as_planned(sessions: sessionmaker[Session]) -> None:
    # create_job stores them by the driver's bulk path (executemany, or PostgreSQL's COPY),
    # with ids of the job's random part and the order: each row as planned, text as given.
    cases = ["plain", ODD, "back\\slash, comma; 'single'"]
    jobs = [
        submit(
            sessions,
            cases=cases,
            rounds=3,
            comparison="docs-lift",
            docs={"files": {"a.md": "docs"}},
        )
        for _ in range(2)
    ]
    with sessions() as session:
        for job in jobs:
            rows = session.scalars(
                select(Trial).where(Trial.job_id == job.id).order_by(Trial.order)
            ).all()
            spec_arms = tuple(job.spec["arms"])
            assert [(t.case_id, t.variant, t.round, t.order) for t in rows] == [
                (p.case_id, p.variant, p.round, p.order) for p in plan(cases, 3, spec_arms)
            ]
            assert {(t.status, t.attempt, t.changed, t.image, t.outcome) for t in rows} == {
                ("queued", 1, 0, None, None)
            }
            ids = [t.id for t in rows]
            assert ids == sorted(ids) and len(set(ids)) == len(ids) == job.planned == 18
            assert all(i.startswith("trial-") and len(i) == len(ids[0]) for i in ids)
        first, second = (
            {t.id[:-8] for t in session.scalars(select(Trial).where(Trial.job_id == job.id))}
            for job in jobs
        )
        assert len(first) == len(second) == 1 and first != second


def test_a_built_jobs_trials_are_stored_with_their_images(sessions: sessionmaker[Session]) -> None:
    # A task suite's job is stored `building` with no trial; once its environments are built,
    # `start_built_job` plans them, each (case, variant) with an image of its own in it.
    request = JobRequest.model_validate(
        {"suite": "sha256:" + "ab" * 32, "model": {"provider": "simulated", "id": "x"}, "rounds": 2}
    )
    with sessions.begin() as session:
        session.add(
            Suite(sha256="ab" * 32, name="tasks", source="", created_at=now(), kind="harbor")
        )
        session.flush()
        job = create_job(
            session,
            request,
            StoredSuite("ab" * 32, "tasks"),
            resolve_design(request, ["built", "plain"]),
            image="examhall/sandbox:test",
            image_digest=None,
        )
    assert job.status == "building"
    with sessions.begin() as session:
        images = {("built", "default"): ("examhall/env:built", "sha256:built")}
        assert start_built_job(session, job.id, images)
    with sessions() as session:
        rows = session.scalars(
            select(Trial).where(Trial.job_id == job.id).order_by(Trial.order)
        ).all()
        assert [(t.case_id, t.round, t.image, t.image_digest, t.status) for t in rows] == [
            ("built", 1, "examhall/env:built", "sha256:built", "queued"),
            ("plain", 1, None, None, "queued"),
            ("built", 2, "examhall/env:built", "sha256:built", "queued"),
            ("plain", 2, None, None, "queued"),
        ]
        assert counts.read(session, job.id) == counts.Counts(
            attempts=4, queued=4, running=0, finished=0, passed=0, failed=0, error=0, version=2
        )
