"""Faults inside a trial stay inside its limits and leave the next trial healthy."""

from __future__ import annotations

from collections.abc import Callable

import docker
import docker.errors
import pytest

from service.launch.trial import TrialRecord

pytestmark = pytest.mark.docker

FAULTS = "tests/suites/faults.py"


def _assert_container_gone(client: docker.DockerClient, record: TrialRecord) -> None:
    assert record.sandbox is not None and record.sandbox.sandbox_id
    with pytest.raises(docker.errors.NotFound):
        client.containers.get(record.sandbox.sandbox_id)


def test_agent_past_the_deadline_ends_as_timeout(
    trial: Callable[..., TrialRecord], docker_client: docker.DockerClient
) -> None:
    record = trial(FAULTS, "sleeper", "faux/run", deadline_s=4)
    assert record.result.error_kind == "timeout"
    assert record.result.outcome == "error"
    assert "4 s deadline" in (record.result.error_message or "")
    assert record.sandbox is not None and record.sandbox.timed_out
    assert record.wall_s < 4 + 5, "the deadline kill took too long"
    # What streamed before the kill is kept: the agent's sleeping tool call.
    assert any(e.type == "tool_call" for e in record.events)
    _assert_container_gone(docker_client, record)


@pytest.mark.parametrize(
    ("case_id", "evidence", "limit"),
    [
        ("fork-bomb", "Resource temporarily unavailable", "pids"),
        ("memory-hog", "killed by SIGKILL", "memory"),
        ("disk-filler", "No space left on device", "disk:/tmp"),
    ],
)
def test_resource_attack_is_contained(
    trial: Callable[..., TrialRecord],
    docker_client: docker.DockerClient,
    case_id: str,
    evidence: str,
    limit: str,
) -> None:
    record = trial(FAULTS, case_id, "faux/run", deadline_s=90)
    # The trial records which limit stopped the agent, read from the cgroup and filesystem.
    assert record.result.limits_hit == [limit]
    assert any(e.type == "lifecycle" and limit in e.detail for e in record.events)  # type: ignore[union-attr]
    # The limit stopped the attack (its evidence is in the tool output) and the worker went
    # on to write survived.txt, so both judges pass.
    assert record.result.outcome == "passed", record.result.judges
    attack = next(e for e in record.events if e.type == "tool_result")
    assert evidence in f"{attack.content}{attack.error}"  # type: ignore[union-attr]
    _assert_container_gone(docker_client, record)
    # The next trial on the same engine is healthy.
    after = trial("evals/smoke.py", "create-greeting", "faux/solution")
    assert after.result.outcome == "passed"


def test_worker_killed_for_memory_is_limit_exceeded(trial: Callable[..., TrialRecord]) -> None:
    record = trial(FAULTS, "judge-eats-memory", "faux/run")
    assert record.result.error_kind == "limit_exceeded"
    # The supervisor outlived the worker and read the OOM kill from the memory cgroup.
    assert record.result.failed_step == "judge"
    assert "passed its memory limit" in (record.result.error_message or "")


def test_agent_that_kills_the_worker_fails_the_trial(trial: Callable[..., TrialRecord]) -> None:
    # The tools run as the worker's user and can signal it, but not the root supervisor,
    # which reports the death: a failure the agent caused, counted against it.
    record = trial(FAULTS, "kill-the-worker", "faux/run")
    assert record.result.error_kind == "agent_error"
    assert record.result.failed_step == "run_agent"
    assert "killed by SIGKILL" in (record.result.error_message or "")
    # The transcript up to the kill survives in the session artifact.
    session = record.artifacts["session.jsonl"].decode()
    assert "kill -9 -1" in session
