"""A real third-party agent from PyPI (the `llm` CLI) in a sandbox image variant, driven by a
scripted model through the relay, judged by the case's own judges."""

from __future__ import annotations

import uuid

import docker
import httpx
import pytest

from sandbox.protocol import ModelRef, RunSpec
from service.backends.docker import DockerBackend, DockerSettings
from service.domain.agents import AGENTS
from service.gateway import Budget, TrialGateway
from service.images.agent_images import ensure_agent_image
from service.launch.launcher import Launcher
from service.launch.trial import run_trial
from service.providers import ProviderEntry
from service.suites.python import load_suite
from tests.provider_server import Answer, Received, openai_answer, provider_server

pytestmark = pytest.mark.docker


def scripted(request: Received) -> Answer:
    """Writes hello.txt with the agent's own write_file tool, then says it is done."""
    if any(m.get("role") == "tool" for m in request.body["messages"]):
        return openai_answer(text="I wrote hello.txt.")
    return openai_answer(tool=("write_file", {"path": "hello.txt", "content": "Hello, exam hall!"}))


@pytest.fixture(scope="session")
def llm_image(docker_client: docker.DockerClient, sandbox_image: str) -> str:
    llm = AGENTS["llm"]
    return ensure_agent_image(
        docker_client, sandbox_image, llm.name, llm.requirement, progress=print
    )


def test_llm_cli_solves_a_smoke_case_through_the_relay(
    llm_image: str, docker_client: docker.DockerClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EXAMHALL_TEST_LLM_KEY", "k-real")
    with provider_server(scripted) as fake, httpx.Client() as http:
        entry = ProviderEntry(
            name="fakeai", kind="openai", base_url=f"{fake.url}/v1", key_env="EXAMHALL_TEST_LLM_KEY"
        )
        gateway = TrialGateway(entry, "gpt-test", budget=Budget(), http=http)
        backend = DockerBackend(DockerSettings(image=llm_image), docker_client)
        record = run_trial(
            Launcher(backend),
            RunSpec(
                trial_id=f"llm-{uuid.uuid4().hex[:8]}",
                suite=load_suite("smoke"),
                case_id="create-greeting",
                model=ModelRef("fakeai", "gpt-test"),
                command=AGENTS["llm"].command,
            ),
            job_id="tests",
            deadline_s=120,
            on_model_call=gateway,
        )
    result = record.result
    assert result.outcome == "passed", (result.error_message, record.artifacts.get("agent.stderr"))
    # The third-party CLI asked for the model with its own tool list, through our endpoint.
    tools = [t["function"]["name"] for t in fake.received[0].body["tools"]]
    assert {"write_file", "read_file", "run"} <= set(tools)
    assert [r.headers.get("Authorization") for r in fake.received] == ["Bearer k-real"] * 2
    assert record.artifacts["agent.stdout"].decode().strip() == "I wrote hello.txt."
    assert result.usage.requests == 2 and result.model_returned == "gpt-test-2026-01-01"
