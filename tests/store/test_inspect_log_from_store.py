"""A job's Inspect log built from the store (service/report/inspect_from_store.py), on SQLite
and PostgreSQL, read back by inspect_ai: a comparison's two variants over two rounds, a
retried infra error, transcripts written as the scheduler writes them, and the job exported
while a trial still runs and again once it has ended."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from inspect_ai.log import EvalLog, read_eval_log
from sqlalchemy.orm import Session, sessionmaker

from sandbox.protocol import (
    JudgeScore,
    LifecycleEvent,
    MessageEvent,
    ToolCall,
    ToolCallEvent,
    ToolResultEvent,
    TrialResult,
    Usage,
)
from service.launch.trial import TrialRecord
from service.report.inspect_from_store import job_inspect_log
from service.report.inspect_log import log_file_name
from service.scheduler import EventSink, Scheduler
from service.store import trials
from service.store.models import Job
from tests.store.conftest import submit

PROMPT = "Create a file hello.txt whose only content is: Hello, exam hall!"
CALL = ToolCall("c1", "write", {"path": "hello.txt", "content": "Hello, exam hall!"})
TRANSCRIPT = [
    LifecycleEvent(step="model", detail="simulated/coin?p=1: simulated"),
    MessageEvent(role="user", content=PROMPT),
    MessageEvent(
        role="assistant",
        content="",
        tool_calls=[CALL],
        stop_reason="tool_use",
        model="sim-1",
        usage=Usage(120, 10, 1, cache_read_tokens=100),
    ),
    ToolCallEvent(id=CALL.id, name=CALL.name, arguments=CALL.arguments),
    ToolResultEvent(tool_call_id=CALL.id, name=CALL.name, content="", error="disk full"),
    MessageEvent(role="assistant", content="I could not write it.", stop_reason="stop"),
]
USED = Usage(240, 20, 2, cache_read_tokens=100, cache_write_tokens=40)
PASSED = TrialResult(
    "passed",
    score=1.0,
    judges=[JudgeScore("hello.txt", 1.0, "matches"), JudgeScore("unsure", float("nan"))],
    usage=USED,
    model_requested="simulated/coin?p=1",
    model_returned="sim-1",
    final_text="I could not write it.",
    timings={"run_agent": 2.5, "judge": 0.1},
)


def _run(
    scheduler: Scheduler, sessions: sessionmaker[Session], trial_id: str, end: TrialResult
) -> None:
    sink = EventSink(sessions, trial_id)
    for event in TRANSCRIPT:
        sink(event)
    sink.flush()
    scheduler.record(trial_id, TrialRecord(trial_id, end, wall_s=3.0))


def _exported(sessions: sessionmaker[Session], job_id: str, tmp_path: Path) -> EvalLog:
    """The log as the route answers it, written under its name and read by Inspect: the
    header alone (as `inspect view` lists logs) and whole."""
    with sessions() as session:
        job = session.get(Job, job_id)
        assert job is not None
        log, name = job_inspect_log(session, job), log_file_name(job)
    tmp_path.mkdir()
    path = tmp_path / name
    path.write_text(json.dumps(log))
    header = read_eval_log(str(path), header_only=True)
    assert header.samples is None and header.eval.eval_id == job_id
    return read_eval_log(str(path))


def test_a_stored_comparison_reads_back_in_inspect(
    sessions: sessionmaker[Session], scheduler: Scheduler, tmp_path: Path
) -> None:
    variants: dict[str, Any] = {"plain": {}, "terse": {"rules": "Answer in one line."}}
    job = submit(sessions, cases=["create-greeting"], rounds=2, variants=variants, baseline="plain")
    assert len(scheduler.claim(4)) == 4
    with sessions() as session:
        claimed = {(t.variant, t.round): t.id for t in trials.job_trials(session, job.id)}
    _run(scheduler, sessions, claimed["plain", 1], PASSED)
    infra = TrialResult("error", error_kind="infra_error", error_message="the engine went away")
    scheduler.record(claimed["plain", 2], TrialRecord(claimed["plain", 2], infra))
    ((retry, _),) = scheduler.claim(4)
    _run(scheduler, sessions, retry, PASSED)
    failed = TrialResult("failed", score=0.0, judges=[JudgeScore("hello.txt", 0.0, "missing")])
    _run(scheduler, sessions, claimed["terse", 1], failed)

    # ("terse", 2) still runs: the log is Inspect's of a running eval, without it.
    running = _exported(sessions, job.id, tmp_path / "running")
    assert running.status == "started" and running.stats.completed_at == ""
    assert running.samples is not None
    assert sorted((s.id, s.epoch) for s in running.samples) == [
        ("plain:create-greeting", 1),
        ("plain:create-greeting", 2),
        ("terse:create-greeting", 1),
    ]
    timeout = TrialResult("error", error_kind="timeout", error_message="600 s passed")
    _run(scheduler, sessions, claimed["terse", 2], timeout)

    log = _exported(sessions, job.id, tmp_path / "finished")
    assert log.status == "success" and log.stats.completed_at != ""
    assert log.samples is not None and len(log.samples) == 4
    by_key = {(s.id, s.epoch): s for s in log.samples}
    # The plan: a step per variant, the baseline first, with its harness.
    assert [(s.params["variant"], s.params.get("rules")) for s in log.plan.steps] == [
        ("plain", None),
        ("terse", "Answer in one line."),
    ]
    assert log.eval.config.epochs == 2 and log.eval.task_args["baseline"] == "plain"
    assert log.eval.dataset.sample_ids == ["create-greeting"]

    first = by_key["plain:create-greeting", 1]
    assert first.input == PROMPT and first.metadata["attempt"] == 1
    assert [m.role for m in first.messages] == ["user", "assistant", "tool", "assistant"]
    tool = first.messages[2]
    assert tool.role == "tool" and tool.error is not None and tool.error.message == "disk full"
    (info,) = [e for e in first.events if e.event == "info"]
    assert info.source == "model"
    # Inspect counts input tokens without the cached ones; examhall's count them too.
    usage = first.model_usage["simulated/coin?p=1"]
    assert (usage.input_tokens, usage.input_tokens_cache_read, usage.input_tokens_cache_write) == (
        100,
        100,
        40,
    )
    assert usage.total_tokens == 260
    # A judge's NaN score (kept as null) is left out; the others are the judge's.
    assert first.scores is not None and set(first.scores) == {"hello.txt", "outcome"}
    assert first.working_time == 2.5 and first.total_time == 3.0

    retried = by_key["plain:create-greeting", 2]
    assert retried.metadata["attempt"] == 2 and retried.error is None
    assert retried.error_retries is not None
    assert [e.message for e in retried.error_retries] == ["infra_error: the engine went away"]

    timed_out = by_key["terse:create-greeting", 2]
    assert timed_out.error is not None and timed_out.error.message == "timeout: 600 s passed"
    assert timed_out.limit is not None and timed_out.limit.type == "time"
    assert timed_out.scores is not None and timed_out.scores["outcome"].value == "I"
    assert by_key["terse:create-greeting", 1].scores["outcome"].value == "I"  # type: ignore[index]

    assert log.results is not None
    outcome, judge = log.results.scores
    assert (outcome.name, outcome.metrics["accuracy"].value) == ("outcome", 0.5)
    assert (judge.name, judge.metrics["mean"].value, judge.scored_samples) == (
        "hello.txt",
        2 / 3,
        3,
    )
    assert (log.results.total_samples, log.results.completed_samples) == (4, 3)
    assert log.stats.model_usage["simulated/coin?p=1"].output_tokens == 40
