"""The integrity invariant, tried from inside real trials: nothing the agent does may end its
trial unscored (`sandbox_error`, `judge_error`, `infra_error`) or retried. Each attack in
tests/suites/hostile_agent.py must end as a scored failure, with the cap it hit recorded,
and its transcript kept."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import docker
import pytest

from sandbox.protocol import MAX_LINE_BYTES, Limits, ModelRef, RunSpec, SuiteBundle
from service.backends.base import Resources
from service.backends.docker import DockerBackend, DockerSettings
from service.launch.launcher import Launcher
from service.launch.trial import TrialRecord, run_trial

pytestmark = pytest.mark.docker

SUITE_PATH = Path(__file__).parent.parent / "suites" / "hostile_agent.py"
SUITE = SuiteBundle("hostile_agent", SUITE_PATH.read_text())
SCORED = ("passed", "failed")
AGENT_SIDE = ("agent_error", "provider_error", "timeout", "limit_exceeded")


def attack(trial: Callable[..., TrialRecord], case: str, **spec: object) -> TrialRecord:
    record = trial(SUITE, case, "faux/attack", **spec)
    result = record.result
    assert result.outcome in SCORED or result.error_kind in AGENT_SIDE, result
    session = record.artifacts.get("session.jsonl")
    assert session is not None and session.strip(), "the transcript must be kept"
    assert all(json.loads(line) for line in session.decode().splitlines())
    return record


def test_undecodable_file_names_reach_the_model_as_escapes(
    trial: Callable[..., TrialRecord],
) -> None:
    record = attack(trial, "undecodable-file-name")
    assert record.result.outcome == "failed"
    results = [e for e in record.events if e.type == "tool_result"][1:]
    assert [r.name for r in results] == ["ls", "find", "grep"]
    for listing in results[:2]:
        assert "bad-\\udcff\\udcfe.txt" in listing.content, listing


def test_lone_surrogates_in_model_output_are_carried_visibly(
    trial: Callable[..., TrialRecord],
) -> None:
    record = attack(trial, "lone-surrogate")
    assert record.result.outcome == "failed"
    assert record.result.final_text == "Finished \\ud83d without its pair."


def test_a_huge_sparse_file_fails_the_judge_read_cap(trial: Callable[..., TrialRecord]) -> None:
    record = attack(trial, "huge-sparse-answer")
    result = record.result
    assert (result.error_kind, result.failed_step) == ("limit_exceeded", "judge")
    assert result.limits_hit == ["judge_read_bytes"]
    assert "answer.txt larger than the 16777216 bytes" in (result.error_message or "")


def test_a_judge_that_raises_on_agent_output_fails_the_trial(
    trial: Callable[..., TrialRecord],
) -> None:
    result = attack(trial, "judge-trips-on-garbage").result
    assert (result.error_kind, result.failed_step) == ("agent_error", "judge")
    assert "Judge parses could not score the agent's work (JSONDecodeError" in (
        result.error_message or ""
    )


def test_file_absent_sees_a_dangling_symlink(trial: Callable[..., TrialRecord]) -> None:
    result = attack(trial, "dangling-symlink").result
    assert result.outcome == "failed" and result.judges[0].detail == "secret.txt still exists"


def test_tool_calls_in_one_turn_are_capped(trial: Callable[..., TrialRecord]) -> None:
    record = attack(trial, "tool-calls-in-one-turn")
    assert record.result.error_kind == "limit_exceeded"
    assert record.result.limits_hit == ["tool_calls_per_turn"]
    assert not [e for e in record.events if e.type == "tool_call"], "no call of the turn ran"


def test_tool_calls_per_trial_are_capped(trial: Callable[..., TrialRecord]) -> None:
    limits = Limits(max_turns=1000, max_tool_calls=25)
    record = attack(trial, "transcript-flood", limits=limits)
    assert record.result.limits_hit == ["tool_calls"]
    assert record.result.tool_calls == 25


def test_the_transcript_is_capped_in_bytes(trial: Callable[..., TrialRecord]) -> None:
    limits = Limits(max_turns=1000, max_event_bytes=4 * 1024 * 1024)
    record = attack(trial, "transcript-flood", limits=limits)
    assert record.result.error_kind == "limit_exceeded"
    assert record.result.limits_hit == ["event_bytes"]
    session = record.artifacts["session.jsonl"]
    assert 3 * 1024 * 1024 < len(session) < 5 * 1024 * 1024
    assert b"transcript reached its cap of 4194304 bytes" in session


def test_the_transcript_is_capped_in_events(trial: Callable[..., TrialRecord]) -> None:
    record = attack(trial, "transcript-flood", limits=Limits(max_turns=1000, max_events=60))
    assert record.result.limits_hit == ["events"]
    # The cap, and the worker's note of it; the supervisor's own notes are not the agent's.
    worker_events = [e for e in record.events if getattr(e, "step", "") != "oom_protection"]
    assert len(worker_events) == 61


def test_an_emoji_read_flood_is_scored_and_its_session_kept(
    trial: Callable[..., TrialRecord],
) -> None:
    """Issue 27: under every cap, yet an ASCII-escaped session of it would pass the channel's
    line limit; the trial must still be scored, with the supervisor's session kept."""
    record = attack(trial, "emoji-read-flood", deadline_s=240)
    assert record.result.outcome == "failed", record.result
    reads = [e for e in record.events if e.type == "tool_result" and e.name == "read"]
    assert len(reads) == 420 and all(not e.error for e in reads)
    session = record.artifacts["session.jsonl"]
    # The supervisor's own session, its events in UTF-8 (the control plane rebuilds one from
    # the events it got only when none arrived); 4 bytes a character keep it under a line.
    assert "\U0001f600".encode() * 63 in session
    assert len(session) < MAX_LINE_BYTES * 3 // 4
    assert sum(b'"tool_result"' in line for line in session.splitlines()) == 420


def test_a_quiet_tool_call_longer_than_the_clients_read_timeout_is_not_an_infra_error(
    docker_client: docker.DockerClient, sandbox_image: str
) -> None:
    client = docker.from_env(timeout=3)
    backend = DockerBackend(DockerSettings(image=sandbox_image), client)
    spec = RunSpec(
        trial_id="quiet", suite=SUITE, case_id="quiet-for-long", model=ModelRef("faux", "attack")
    )
    result = run_trial(Launcher(backend), spec, job_id="tests", deadline_s=60).result
    assert result.outcome == "failed", result
    assert result.judges[0].detail.startswith("answer.txt differs")


def test_a_trial_killed_at_its_deadline_keeps_its_transcript(
    trial: Callable[..., TrialRecord],
) -> None:
    record = attack(trial, "outlast-the-deadline", deadline_s=6)
    assert record.result.error_kind == "timeout"
    session = record.artifacts["session.jsonl"].decode()
    assert '"tool_call"' in session and "sleep 120" in session


def test_run_trial_reports_a_flooding_trial() -> None:
    """`examhall run-trial` streams a multi-megabyte transcript and still prints its result."""
    done = subprocess.run(
        [sys.executable, "-m", "service.cli", "run-trial", "--suite", str(SUITE_PATH),
         "--case", "transcript-flood", "--model", "faux/attack", "--json"],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr[-2000:]
    output = json.loads(done.stdout)
    assert output["error_kind"] == "limit_exceeded"
    assert "used all 50 turns" in output["error_message"]
    assert len(output["events"]) > 100


def test_a_memory_hog_that_lowers_its_oom_score_is_a_scored_failure(
    docker_client: docker.DockerClient, sandbox_image: str
) -> None:
    """Whichever process the OOM killer picks (the hogs, the worker or, where it cannot be
    exempted, the supervisor), the trial ends scored: never a retried infra_error."""
    settings = DockerSettings(
        image=sandbox_image, resources=Resources(memory_bytes=192 * 1024 * 1024)
    )
    backend = DockerBackend(settings, docker_client)
    spec = RunSpec(
        trial_id="hog", suite=SUITE, case_id="memory-hog-below-the-harness",
        model=ModelRef("faux", "attack"),
    )  # fmt: skip
    result = run_trial(Launcher(backend), spec, job_id="tests", deadline_s=120).result
    assert result.outcome in SCORED or result.error_kind in AGENT_SIDE, result
    assert "memory" in result.limits_hit or result.error_kind == "limit_exceeded", result
