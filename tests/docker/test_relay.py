"""Real models through the relay: the worker's requests cross the channel, the gateway adds
the key and calls a provider on loopback; the key never enters the container."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.docker.conftest import (
    HOSTILE_PLANTED,
    PROVIDER_KEY_ENV,
    Server,
    canary_search_command,
    canary_search_result,
    canary_search_suite,
    hostile_findings,
    hostile_suite,
)
from tests.provider_server import Answer, Received, openai_answer, openai_error, provider_server

pytestmark = pytest.mark.docker

KEY_ENV = PROVIDER_KEY_ENV


def _has_tool_result(request: Received) -> bool:
    return any(m.get("role") == "tool" for m in request.body["messages"])


def solve_greeting(request: Received) -> Answer:
    """A model that writes hello.txt, then says it is done."""
    if _has_tool_result(request):
        return openai_answer(text="I wrote hello.txt.")
    return openai_answer(tool=("write", {"path": "hello.txt", "content": "Hello, exam hall!"}))


@pytest.fixture
def relay_server(
    start_server: Callable[..., Server],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    canary: str,
) -> Iterator[Callable[[Callable[[Received], Answer]], tuple[Server, Any]]]:
    """A control plane whose providers file names a loopback provider `fakeai`."""
    with_servers: list[Any] = []

    def start(
        respond: Callable[[Received], Answer], price: bool = False, kind: str = "openai"
    ) -> tuple[Server, Any]:
        context = provider_server(respond)
        fake = context.__enter__()
        with_servers.append(context)
        prices = (
            '[providers.fakeai.prices."gpt-test"]\ninput = 2.0\noutput = 8.0\n' if price else ""
        )
        providers = tmp_path / "providers.toml"
        providers.write_text(
            f'[providers.fakeai]\nkind = "{kind}"\nbase_url = "{fake.url}/v1"\n'
            f'key_env = "{KEY_ENV}"\n{prices}'
        )
        monkeypatch.setenv("EXAMHALL_PROVIDERS", str(providers))
        return start_server(), fake

    yield start
    for context in with_servers:
        context.__exit__(None, None, None)


MODEL = {"provider": "fakeai", "id": "gpt-test"}
GREETING = {"suite": "smoke", "cases": ["create-greeting"], "model": MODEL}


def _everything(server: Server, job_id: str) -> str:
    """Every byte the service will show about a job: trials, events, artifacts, report."""
    parts = [json.dumps(server.http.get(f"/v1/jobs/{job_id}").json())]
    trials = server.http.get(f"/v1/jobs/{job_id}/trials").json()
    parts.append(json.dumps(trials))
    for trial in trials:
        parts.append(server.http.get(f"/v1/trials/{trial['id']}/events").text)
        for name in trial["artifacts"]:
            parts.append(server.http.get(f"/v1/trials/{trial['id']}/artifacts/{name}").text)
    parts.append(server.http.get(f"/v1/jobs/{job_id}/report", params={"format": "text"}).text)
    parts.append(server.http.get(f"/v1/jobs/{job_id}/report").text)
    return "\n".join(parts)


def test_relayed_model_solves_a_case_and_the_key_stays_outside(
    relay_server: Any, canary: str
) -> None:
    server, fake = relay_server(solve_greeting, price=True)
    created = server.submit(**GREETING)
    server.wait(created["id"])
    (trial,) = server.http.get(f"/v1/jobs/{created['id']}/trials").json()
    assert trial["outcome"] == "passed", trial
    # The provider saw our key and the OpenAI wire format; the model it named is recorded.
    assert [r.headers.get("Authorization") for r in fake.received] == [f"Bearer {canary}"] * 2
    assert fake.received[0].body["model"] == "gpt-test"
    assert trial["model_requested"] == "fakeai/gpt-test"
    assert trial["model_returned"] == "gpt-test-2026-01-01"
    assert (trial["usage"]["input_tokens"], trial["usage"]["output_tokens"]) == (200, 40)
    # Priced: 200 in at $2/M and 40 out at $8/M.
    assert trial["usage"]["cost_usd"] == pytest.approx(200 * 2e-6 + 40 * 8e-6)
    events = server.http.get(f"/v1/trials/{trial['id']}/events").json()
    generations = [e for e in events if e["payload"].get("step") == "generation"]
    assert len(generations) == 2
    assert canary not in _everything(server, created["id"])


def test_canary_key_cannot_be_found_from_inside(relay_server: Any, canary: str) -> None:
    """The agent's own model (through the relay) runs the canary search from evals/probes."""

    def attack(request: Received) -> Answer:
        if _has_tool_result(request):
            return openai_answer(text="Searched.")
        return openai_answer(tool=("bash", {"command": canary_search_command()}))

    server, _ = relay_server(attack)
    suite = canary_search_suite("canary-relay")
    created = server.submit(suite=suite, model=MODEL, cases=["canary-relay"])
    server.wait(created["id"])
    (trial,) = server.http.get(f"/v1/jobs/{created['id']}/trials").json()
    events = server.http.get(f"/v1/trials/{trial['id']}/events").json()
    output = next(e["payload"]["content"] for e in events if e["type"] == "tool_result")
    result = canary_search_result(output)
    assert result["find_canary"] == {"ok": False, "errno": "ENOENT"}
    assert int(result["files_scanned"]["value"]) > 100
    assert result["worker_mem"]["ok"] is False
    assert canary not in _everything(server, created["id"])


def test_token_budget_stops_before_sending(relay_server: Any) -> None:
    # The first answer reports 5000 + 20 tokens; with a budget of 5500, the second request
    # (about a thousand tokens of prompt) would pass it, so it is never sent.
    def expensive(request: Received) -> Answer:
        return openai_answer(tool=("write", {"path": "a.txt", "content": "x"}), prompt_tokens=5000)

    server, fake = relay_server(expensive)
    created = server.submit(**GREETING, limits={"max_tokens": 5500})
    server.wait(created["id"])
    (trial,) = server.http.get(f"/v1/jobs/{created['id']}/trials").json()
    assert trial["error_kind"] == "limit_exceeded"
    assert "budget of 5500 tokens (5020 used)" in trial["error_message"]
    assert len(fake.received) == 1, "a request past the budget reached the provider"


def test_request_budget(relay_server: Any) -> None:
    server, fake = relay_server(solve_greeting)
    created = server.submit(**GREETING, limits={"max_requests": 1})
    server.wait(created["id"])
    (trial,) = server.http.get(f"/v1/jobs/{created['id']}/trials").json()
    assert trial["error_kind"] == "limit_exceeded" and len(fake.received) == 1


def test_429_is_retried_then_succeeds(relay_server: Any) -> None:
    seen: list[int] = []

    def flaky(request: Received) -> Answer:
        seen.append(1)
        if len(seen) == 1:
            return openai_error(429, "Rate limit reached", {"Retry-After": "0"})
        return solve_greeting(request)

    server, fake = relay_server(flaky)
    created = server.submit(**GREETING)
    server.wait(created["id"])
    (trial,) = server.http.get(f"/v1/jobs/{created['id']}/trials").json()
    assert trial["outcome"] == "passed"
    assert len(fake.received) == 3  # the 429, its retry, and the second turn


def test_persistent_500_gives_up_as_provider_error(relay_server: Any) -> None:
    server, fake = relay_server(lambda _request: openai_error(500, "The server had an error"))
    created = server.submit(**GREETING)
    server.wait(created["id"], timeout=120)
    (trial,) = server.http.get(f"/v1/jobs/{created['id']}/trials").json()
    assert trial["error_kind"] == "provider_error"
    assert "The server had an error" in trial["error_message"]
    assert "gave up after 4 attempts" in trial["error_message"]
    assert len(fake.received) == 4


def test_401_is_not_retried(relay_server: Any) -> None:
    server, fake = relay_server(lambda _request: openai_error(401, "Incorrect API key provided"))
    created = server.submit(**GREETING)
    server.wait(created["id"])
    (trial,) = server.http.get(f"/v1/jobs/{created['id']}/trials").json()
    assert trial["error_kind"] == "provider_error"
    assert "Incorrect API key provided" in trial["error_message"]
    assert len(fake.received) == 1


def test_provider_without_key_or_unknown_is_422(
    relay_server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    server, _ = relay_server(solve_greeting)
    monkeypatch.delenv(KEY_ENV)
    response = server.http.post("/v1/jobs", json=GREETING)
    assert response.status_code == 422
    (detail,) = response.json()["detail"]
    assert detail["loc"] == ["body", "model", "provider"]
    assert f"set the environment variable {KEY_ENV}" in detail["msg"]
    unknown = server.http.post("/v1/jobs", json={**GREETING, "model": {"provider": "x", "id": "y"}})
    assert unknown.status_code == 422 and "fakeai" in unknown.json()["detail"][0]["msg"]


def test_box_default_model_needs_both_halves(
    relay_server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    server, _ = relay_server(solve_greeting)
    body = {"suite": "smoke", "cases": ["create-greeting"]}
    monkeypatch.setenv("EXAMHALL_DEFAULT_PROVIDER", "fakeai")
    half = server.http.post("/v1/jobs", json=body)
    assert half.status_code == 422
    assert "Set both EXAMHALL_DEFAULT_PROVIDER and EXAMHALL_DEFAULT_MODEL" in half.text
    monkeypatch.setenv("EXAMHALL_DEFAULT_MODEL", "gpt-test")
    created = server.submit(**body)
    server.wait(created["id"])
    (trial,) = server.http.get(f"/v1/jobs/{created['id']}/trials").json()
    assert (trial["model_requested"], trial["outcome"]) == ("fakeai/gpt-test", "passed")


def anthropic_greeting(request: Received) -> Answer:
    """The Messages API: a tool_use block, then text once the tool_result came back."""
    last = request.body["messages"][-1]
    answered = isinstance(last["content"], list) and any(
        block.get("type") == "tool_result" for block in last["content"]
    )
    content: list[dict[str, Any]] = (
        [{"type": "text", "text": "I wrote hello.txt."}]
        if answered
        else [
            {
                "type": "tool_use",
                "id": "toolu_1",
                "name": "write",
                "input": {"path": "hello.txt", "content": "Hello, exam hall!"},
            }
        ]
    )
    body = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-test-2026",
        "content": content,
        "stop_reason": "end_turn" if answered else "tool_use",
        "usage": {"input_tokens": 50, "output_tokens": 10},
    }
    return 200, {}, body


def test_anthropic_kind_through_the_relay(relay_server: Any, canary: str) -> None:
    server, fake = relay_server(anthropic_greeting, kind="anthropic")
    created = server.submit(**GREETING)
    server.wait(created["id"])
    (trial,) = server.http.get(f"/v1/jobs/{created['id']}/trials").json()
    assert trial["outcome"] == "passed", trial
    assert trial["model_returned"] == "claude-test-2026"
    assert [r.path for r in fake.received] == ["/v1/messages"] * 2
    assert all(r.headers.get("x-api-key") == canary for r in fake.received)
    # The system prompt goes in its own field, never as a message.
    assert "<rules>" in fake.received[0].body["system"]
    assert canary not in _everything(server, created["id"])


# A small agent of the kind an external CLI is: it knows only OPENAI_BASE_URL and
# OPENAI_API_KEY, speaks Chat Completions, and runs its own write tool.
EXTERNAL_AGENT = r"""
import json, os, sys, urllib.request
url = os.environ["OPENAI_BASE_URL"] + "/chat/completions"
tools = [{"type": "function", "function": {"name": "write", "parameters": {"type": "object"}}}]
messages = [{"role": "user", "content": sys.argv[1]}]
for _ in range(5):
    body = json.dumps({"model": "m", "messages": messages, "tools": tools}).encode()
    headers = {"Authorization": "Bearer " + os.environ["OPENAI_API_KEY"],
               "content-type": "application/json"}
    request = urllib.request.Request(url, data=body, headers=headers)
    message = json.load(urllib.request.urlopen(request))["choices"][0]["message"]
    messages.append(message)
    if not message.get("tool_calls"):
        print("agent:", message["content"])
        break
    for call in message["tool_calls"]:
        arguments = json.loads(call["function"]["arguments"])
        with open(arguments["path"], "w") as handle:
            handle.write(arguments["content"])
        messages.append({"role": "tool", "tool_call_id": call["id"], "content": "ok"})
"""


def test_external_agent_reaches_the_relayed_model_through_the_endpoint(
    relay_server: Any, canary: str
) -> None:
    server, fake = relay_server(solve_greeting)
    created = server.submit(
        **GREETING,
        variants={"cli": {"command": ["python3", "-c", EXTERNAL_AGENT, "{task}"]}},
    )
    server.wait(created["id"])
    (trial,) = server.http.get(f"/v1/jobs/{created['id']}/trials").json()
    assert trial["outcome"] == "passed", (trial["error_kind"], trial["error_message"])
    assert len(fake.received) == 2
    # The provider got the real key from the gateway; the agent only ever had a dummy one.
    assert all(r.headers.get("Authorization") == f"Bearer {canary}" for r in fake.received)
    stdout = server.http.get(f"/v1/trials/{trial['id']}/artifacts/agent.stdout").text
    assert stdout == "agent: I wrote hello.txt.\n"
    assert canary not in _everything(server, created["id"])


def test_a_hostile_suite_finds_no_key_at_import_or_judging(relay_server: Any, canary: str) -> None:
    """Suite code searches the worker's objects, every process's environ, cmdline, memory and
    stdin, its own descriptors and every file, at import and at judging: the relay's key
    is in the control plane only, and the planted look-alike shows the search can see."""
    server, _ = relay_server(lambda _request: openai_answer(text="Listed."))
    created = server.submit(suite=hostile_suite(), model=MODEL, cases=["search"])
    server.wait(created["id"])
    at_import, at_judging = hostile_findings(server, created["id"])
    assert HOSTILE_PLANTED in at_import and HOSTILE_PLANTED in at_judging
    assert canary not in at_import and canary not in at_judging
    assert canary not in _everything(server, created["id"])


def write_greeting_with_llm_tools(request: Received) -> Answer:
    """The llm CLI's own tool call, then its done: what the installed agent drives."""
    if any(m.get("role") == "tool" for m in request.body["messages"]):
        return openai_answer(text="I wrote hello.txt.")
    return openai_answer(tool=("write_file", {"path": "hello.txt", "content": "Hello, exam hall!"}))


def test_a_variant_installs_its_agent_over_the_api_and_it_reaches_the_model_by_relay(
    relay_server: Any, canary: str
) -> None:
    server, fake = relay_server(write_greeting_with_llm_tools)
    created = server.submit(
        suite="smoke",
        cases=["create-greeting"],
        variants={"llm": {"model": MODEL, "agent": {"catalogue": "llm"}}},
    )
    assert created["status"] == "building"
    job = server.wait(created["id"], timeout=900)
    assert job["error"] is None, job["error"]
    (trial,) = server.http.get(f"/v1/jobs/{created['id']}/trials").json()
    assert trial["outcome"] == "passed", (trial["error_kind"], trial["error_message"])
    assert trial["image"].startswith("examhall/env-agent:"), trial["image"]
    assert fake.received, "the agent never reached the provider"
    assert canary not in _everything(server, created["id"])
