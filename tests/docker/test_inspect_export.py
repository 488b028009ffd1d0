"""A finished job exported with `examhall export --format inspect` and read back by Inspect
itself (inspect_ai, pinned in the dev extra): real trials through the relay to a scripted
provider on loopback, model-graded judges through the judge gateway."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from inspect_ai.log import EvalLog, list_eval_logs, read_eval_log

from evals.judges_demo import CASES
from tests.docker.conftest import Server, use_loopback_provider
from tests.provider_server import Answer, Received, openai_answer, openai_error, provider_server

pytestmark = pytest.mark.docker

MODEL = {"provider": "fakeai", "id": "gpt-test"}
GRADER = {"provider": "simulated", "id": "grader?pass_if=Paris"}
PROMPTS = {case.id: case.input for case in CASES}
SED = "sed -i 's/debug = true/debug = false/' config.ini"


def scripted(request: Received) -> Answer:
    """capital: answered, graded as passed. ledger-totals: the provider refuses the key (a
    provider error). debug-off: the file fixed by a shell, which its trace judges fail."""
    said = json.dumps(request.body["messages"])
    if "capital of France" in said:
        return openai_answer(text="The capital of France is Paris.")
    if "ledger.csv" in said:
        return openai_error(401, "Incorrect API key provided")
    if any(m.get("role") == "tool" for m in request.body["messages"]):
        return openai_answer(text="Done with sed.")
    return openai_answer(tool=("bash", {"command": SED}))


@pytest.fixture
def finished_job(
    start_server: Callable[..., Server],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    canary: str,
) -> Iterator[tuple[Server, str]]:
    with provider_server(scripted) as fake:
        use_loopback_provider(fake.url, tmp_path, monkeypatch)
        server = start_server()
        created = server.submit(
            suite="judges_demo",
            cases=["debug-off", "capital", "ledger-totals"],
            model=MODEL,
            judge_model=GRADER,
        )
        server.wait(created["id"])
        yield server, created["id"]


def export_cli(server: Server, job_id: str, output: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            *(sys.executable, "-m", "service.cli", "export", job_id, "--format", "inspect"),
            *("-o", str(output), "--server", server.url),
        ],
        env={**os.environ, "EXAMHALL_TOKEN": server.token},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_a_job_exported_as_an_inspect_log_reads_back_in_inspect(
    finished_job: tuple[Server, str], tmp_path: Path
) -> None:
    server, job_id = finished_job
    trials = {t["case_id"]: t for t in server.http.get(f"/v1/jobs/{job_id}/trials").json()}
    assert {c: t["outcome"] for c, t in trials.items()} == {
        "debug-off": "failed",
        "capital": "passed",
        "ledger-totals": "error",
    }, [t["error_message"] for t in trials.values()]
    logs = tmp_path / "logs"
    logs.mkdir()
    done = export_cli(server, job_id, logs)
    assert done.returncode == 0, done.stderr
    path = Path(done.stdout.strip())
    # Named as Inspect names its logs, so that `inspect view` lists it.
    assert [Path(info.name).name for info in list_eval_logs(str(logs))] == [path.name]
    header = read_eval_log(str(path), header_only=True)  # what the viewer's list reads
    assert header.status == "success" and header.samples is None
    log = read_eval_log(str(path))
    assert isinstance(log, EvalLog) and log.status == "success"

    # The job's spec as the eval's task and plan.
    assert (log.eval.task, log.eval.eval_id, log.eval.model) == (
        "judges_demo",
        job_id,
        "fakeai/gpt-test",
    )
    assert log.eval.task_args["cases"] == ["debug-off", "capital", "ledger-totals"]
    assert log.eval.config.epochs == 1 and log.eval.config.time_limit == 600
    assert log.eval.model_roles is not None
    assert log.eval.model_roles["grader"].model == "simulated/grader?pass_if=Paris"  # type: ignore[union-attr]
    (step,) = log.plan.steps
    assert step.solver == "examhall_agent" and step.params["model"] == MODEL

    # One sample per trial, its input the case's prompt.
    assert log.samples is not None
    samples = {s.id: s for s in log.samples}
    assert set(samples) == set(trials) and len(log.samples) == 3
    for case_id, one in samples.items():
        trial = trials[case_id]
        assert one.input == PROMPTS[case_id] and one.epoch == 1
        assert one.uuid == trial["id"] and one.metadata["variant"] == "default"
        assert one.total_time == trial["wall_s"]
        assert one.working_time == trial["timings"].get("run_agent")
        assert one.started_at is not None and one.completed_at is not None
        assert one.messages[0].role == "user" and one.messages[0].text == PROMPTS[case_id]
        # A score per judge, the judge's own value and detail.
        judged = {j["name"]: (j["score"], j["detail"]) for j in trial["judges"]}
        assert one.scores is not None
        assert {
            name: (s.value, s.explanation or "")
            for name, s in one.scores.items()
            if name != "outcome"
        } == judged

    # The shell run: the model's tool call and its result among the messages; failed.
    fixed = samples["debug-off"]
    (asked,) = [m for m in fixed.messages if m.role == "assistant" and m.tool_calls]
    assert asked.tool_calls is not None
    assert (asked.tool_calls[0].function, asked.tool_calls[0].arguments) == (
        "bash",
        {"command": SED},
    )
    (answered,) = [m for m in fixed.messages if m.role == "tool"]
    assert answered.tool_call_id == asked.tool_calls[0].id and answered.function == "bash"  # type: ignore[union-attr]
    assert [e.event for e in fixed.events if e.event == "tool"] == ["tool"]
    assert fixed.scores is not None and fixed.scores["outcome"].value == "I"
    assert fixed.scores["no shell"].value == 0.0 and fixed.error is None
    assert fixed.output.completion == "Done with sed."

    # The graded answer: passed; the agent's usage and the grader's, by model and by role.
    capital = samples["capital"]
    assert capital.scores is not None and capital.scores["outcome"].value == "C"
    agent = capital.model_usage["fakeai/gpt-test"]
    assert (agent.input_tokens, agent.output_tokens, agent.total_tokens) == (100, 20, 120)
    grader = capital.model_usage["simulated/grader?pass_if=Paris"]
    assert grader.output_tokens > 0 and capital.role_usage["grader"] == grader

    # The provider's refusal: an error, and a failure of the task as the report counts it.
    refused = samples["ledger-totals"]
    assert refused.error is not None
    assert refused.error.message.startswith("provider_error: ")
    assert "Incorrect API key provided" in refused.error.message
    assert refused.scores is not None and refused.scores["outcome"].value == "I"

    # The eval's results and usage over its samples.
    assert log.results is not None
    outcome = log.results.scores[0]
    assert (outcome.name, outcome.metrics["accuracy"].value) == ("outcome", pytest.approx(1 / 3))
    assert (log.results.total_samples, log.results.completed_samples) == (3, 2)
    # Three answers of 20 tokens: two of debug-off's run, one of capital's.
    assert log.stats.model_usage["fakeai/gpt-test"].output_tokens == 60
    assert log.stats.completed_at != ""

    # -o naming a file writes that file; a job the server does not have is a clear error.
    named = tmp_path / "mine.json"
    again = export_cli(server, job_id, named)
    assert again.returncode == 0 and again.stdout.strip() == str(named), again.stderr
    assert read_eval_log(str(named)).eval.eval_id == job_id
    missing = export_cli(server, "job-0000000000000000", named)
    assert missing.returncode == 2
    assert "HTTP 404: No job job-0000000000000000." in missing.stderr

    # The route: the team's own job only, and a format it knows.
    with server.as_team(server.team_token("outsiders")) as other:
        assert (
            other.get(f"/v1/jobs/{job_id}/export", params={"format": "inspect"}).status_code == 404
        )
    unknown = server.http.get(f"/v1/jobs/{job_id}/export", params={"format": "csv"})
    assert unknown.status_code == 422 and unknown.json()["detail"][0]["loc"] == ["query", "format"]
    answer = server.http.get(f"/v1/jobs/{job_id}/export", params={"format": "inspect"})
    assert answer.status_code == 200
    assert answer.headers["content-disposition"].startswith('attachment; filename="')
    assert answer.json()["eval"]["task"] == "judges_demo"
