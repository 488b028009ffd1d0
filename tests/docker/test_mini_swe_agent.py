"""mini-swe-agent, a real third-party agent from PyPI, installed over the API above a shipped
Harbor task and driven through the relay by a provider on loopback that answers in the
agent's own action format (a `bash` tool call; `echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT`
ends the run). The task's verifier scores what it did: the right commands pass, wrong ones
fail, scored. The wheels come from PyPI through the control plane's download, as for every
pip agent; nothing else leaves loopback."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import docker
import pytest

from service.images.capped import OWNER_LABEL
from tests.docker.conftest import Server, use_loopback_provider
from tests.provider_server import Answer, Received, openai_answer, provider_server

pytestmark = pytest.mark.docker

VERSION = "2.4.6"
# How a job runs mini-swe-agent unattended (the README's "Agents over the API" shows the
# same with a real provider): -y executes the model's commands without asking,
# --exit-immediately ends when the model submits, and env answers the first-run setup that
# would otherwise prompt (MSWEA_CONFIGURED), keeps litellm from fetching its price list at
# import (LITELLM_LOCAL_MODEL_COST_MAP), and lets a model litellm has no price for run
# (MSWEA_COST_TRACKING; examhall's own budgets count the cost).
MINI_SWE_AGENT = {
    "pip": [f"mini-swe-agent=={VERSION}"],
    "command": ["mini", "-y", "--exit-immediately", "-m", "openai/gpt-test", "-t", "{task}"],
    "env": {
        "MSWEA_CONFIGURED": "true",
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "MSWEA_COST_TRACKING": "ignore_errors",
    },
}
TASK = "count-lines"
HARBOR_DEMO = Path(__file__).parents[2] / "evals" / "harbor_demo"
SUBMIT = "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"
# The commands each scripted model issues, one a turn; the variant's model id picks them.
SCRIPTS = {
    "right": [
        "echo key=$OPENAI_API_KEY base=$OPENAI_BASE_URL; ls /app/logs",
        'cd /app/logs && { total=0; for f in *.log; do c=$(grep -c ERROR "$f");'
        ' echo "$f $c"; total=$((total + c)); done; echo "total $total"; } > /app/report.txt',
        "cat /app/report.txt",
        SUBMIT,
    ],
    # Counts every line, not the ERROR ones: a plausible wrong answer the verifier rejects.
    "wrong": [
        'cd /app/logs && for f in *.log; do echo "$f $(wc -l < "$f")"; done > /app/report.txt',
        SUBMIT,
    ],
}
# The three-environment suite's first build takes minutes; the agent's layer (its wheels
# are some 170 MB) about as long again.
BUILD_TIMEOUT_S = 1500.0


def mini_swe_agents_turn(request: Received) -> Answer:
    """The next command of the script the request's model names, as mini-swe-agent's bash
    tool call, with a line of reasoning as its text."""
    script = SCRIPTS[request.body["model"].removeprefix("script-")]
    done = sum(1 for m in request.body["messages"] if m.get("role") == "tool")
    command = script[min(done, len(script) - 1)]
    return openai_answer(text=f"Step {done + 1}.", tool=("bash", {"command": command}))


def test_mini_swe_agent_installed_over_the_api_solves_a_harbor_task_through_the_relay(
    start_server: Callable[..., Server],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    canary: str,
    docker_client: docker.DockerClient,
) -> None:
    with provider_server(mini_swe_agents_turn) as fake:
        use_loopback_provider(fake.url, tmp_path, monkeypatch)
        server = start_server()
        created = server.submit(
            suite="harbor_demo",
            cases=[TASK],
            variants={
                name: {"model": {"provider": "fakeai", "id": f"script-{name}"}, "agent": agent}
                for name, agent in (("wrong", MINI_SWE_AGENT), ("right", MINI_SWE_AGENT))
            },
            baseline="wrong",
        )
        assert created["status"] == "building"
        job = server.wait(created["id"], timeout=BUILD_TIMEOUT_S)
    assert job["error"] is None, job["error"]
    trials = {t["variant"]: t for t in server.http.get(f"/v1/jobs/{created['id']}/trials").json()}
    right, wrong = trials["right"], trials["wrong"]

    # The verifier scored both: the right commands pass, the wrong ones fail (not an error).
    for trial in right, wrong:
        stderr = server.http.get(f"/v1/trials/{trial['id']}/artifacts/agent.stderr").text
        why = (trial["variant"], trial["error_kind"], trial["error_message"], stderr[-2000:])
        assert trial["outcome"] in ("passed", "failed") and trial["error_kind"] is None, why
    assert (right["outcome"], right["score"]) == ("passed", 1.0), right
    assert (wrong["outcome"], wrong["score"]) == ("failed", 0.0), wrong
    verifier_log = artifact(server, wrong, "verifier.log")
    assert "FAIL: /app/report.txt is not the expected report" in verifier_log, verifier_log
    # Both ran in one layer: mini-swe-agent installed once, above the task's environment,
    # without its install container's build owner (which a build reaper would act on).
    assert right["image"] == wrong["image"] and right["image"].startswith("examhall/env-agent:")
    assert not docker_client.images.get(right["image"]).labels.get(OWNER_LABEL)

    # mini-swe-agent itself ran, and said so on its stdout.
    stdout = artifact(server, right, "agent.stdout")
    assert f"This is mini-swe-agent version {VERSION}" in stdout, stdout
    assert "Saved trajectory" in stdout, stdout
    events = server.http.get(f"/v1/trials/{right['id']}/events").json()
    started = [
        e["payload"]["detail"] for e in events if e["payload"].get("step") == "external_agent"
    ]
    assert started == [" ".join(MINI_SWE_AGENT["command"])], started

    # Every request was mini-swe-agent's own (its system prompt, its one bash tool, the
    # task's instruction in its template), came through the relay with the box's key, and
    # asked for the variant's model whatever name the agent gave.
    by_model: dict[str, list[Received]] = {}
    for request in fake.received:
        by_model.setdefault(request.body["model"], []).append(request)
    assert {m: len(r) for m, r in by_model.items()} == {
        "script-right": len(SCRIPTS["right"]),
        "script-wrong": len(SCRIPTS["wrong"]),
    }
    assert all(r.headers.get("Authorization") == f"Bearer {canary}" for r in fake.received)
    first = by_model["script-right"][0].body
    assert [t["function"]["name"] for t in first["tools"]] == ["bash"], first["tools"]
    system, user = first["messages"][0], first["messages"][1]
    assert system["content"].startswith("You are a helpful assistant"), system
    instruction = (HARBOR_DEMO / TASK / "instruction.md").read_text().strip()
    assert user["content"].startswith(f"Please solve this issue: {instruction}"), user
    # What the commands printed went back to the model as mini-swe-agent's observations;
    # the agent held only the relay's dummy key and loopback address, never the box's key.
    first_output = observation(by_model["script-right"][1], 1)
    assert first_output["returncode"] == 0, first_output
    said = first_output["output"]
    assert said.startswith("key=exh-trial-") and " base=http://127.0.0.1:" in said, said
    assert canary not in json.dumps([r.body for r in fake.received])
    report = observation(by_model["script-right"][-1], 3)["output"]
    assert report == "api.log 2\ndb.log 4\nworker.log 0\ntotal 6\n", report
    # examhall recorded each of the agent's generations, as for the built-in agent.
    assert right["usage"]["requests"] == len(SCRIPTS["right"]), right["usage"]


def artifact(server: Server, trial: dict[str, Any], name: str) -> str:
    response = server.http.get(f"/v1/trials/{trial['id']}/artifacts/{name}")
    assert response.status_code == 200, (name, response.text)
    return response.text


def observation(request: Received, count: int) -> dict[str, Any]:
    """The last of the `count` observations in a request: mini-swe-agent's tool result, the
    JSON of its mini.yaml template, for the command's exit code and output."""
    results = [m["content"] for m in request.body["messages"] if m["role"] == "tool"]
    assert len(results) == count, results
    found: dict[str, Any] = json.loads(results[-1])
    return found
