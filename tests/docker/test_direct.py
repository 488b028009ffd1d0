"""Direct credentials (pi-evals parity): the key is sent to the worker's memory and the worker
calls the provider itself. The provider is one of our own containers on an internal Docker
network, so no traffic leaves the machine."""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import docker
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

pytestmark = pytest.mark.docker

KEY_ENV = PROVIDER_KEY_ENV

# An OpenAI-compatible provider in the sandbox image's python3: it answers the first turn
# with the tool call in $TOOL_CALL, any later turn with text, and logs what it received.
FAKE_PROVIDER = r"""
import base64, json, os, sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
call = json.loads(base64.b64decode(os.environ["TOOL_CALL"]))
class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        seen = {"path": self.path, "auth": self.headers.get("Authorization")}
        print(json.dumps(seen), flush=True)
        answered = any(m["role"] == "tool" for m in body["messages"])
        message = {"role": "assistant", "content": "Done." if answered else None}
        if not answered:
            message["tool_calls"] = [{"id": "call_1", "type": "function", "function": {
                "name": call["name"], "arguments": json.dumps(call["arguments"])}}]
        data = json.dumps({"model": "direct-test-1", "choices": [{"index": 0, "message": message,
            "finish_reason": "stop" if answered else "tool_calls"}],
            "usage": {"prompt_tokens": 100, "completion_tokens": 10}}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
    def log_message(self, *args):
        pass
ThreadingHTTPServer(("0.0.0.0", 8080), Handler).serve_forever()
"""


@pytest.fixture
def direct_box(
    start_server: Callable[..., Server],
    docker_client: docker.DockerClient,
    sandbox_image: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    canary: str,
) -> Iterator[Callable[[str, dict[str, Any]], tuple[Server, Any]]]:
    """A control plane whose direct trials join an internal network with a fake provider."""
    network = docker_client.networks.create(f"examhall-test-{uuid.uuid4().hex[:8]}", internal=True)
    providers: list[Any] = []

    def start(_name: str, tool_call: dict[str, Any]) -> tuple[Server, Any]:
        provider = docker_client.containers.run(
            sandbox_image,
            # A hostname-safe name: Docker's generated names have underscores, which its DNS
            # does not resolve.
            name=f"fakeai-{uuid.uuid4().hex[:8]}",
            entrypoint=["python3", "-c", FAKE_PROVIDER],
            environment={"TOOL_CALL": base64.b64encode(json.dumps(tool_call).encode()).decode()},
            network=network.name,
            labels={"examhall.test": "fake-provider"},
            detach=True,
        )
        providers.append(provider)
        network.reload()
        providers_file = tmp_path / "providers.toml"
        providers_file.write_text(
            '[providers.fakeai]\nkind = "openai"\n'
            f'base_url = "http://{provider.name}:8080/v1"\nkey_env = "{KEY_ENV}"\n'
        )
        monkeypatch.setenv("EXAMHALL_PROVIDERS", str(providers_file))
        monkeypatch.setenv("EXAMHALL_DIRECT_NETWORK", network.name)
        return start_server(), provider

    yield start
    for provider in providers:
        provider.remove(force=True)
    network.remove()


def _received(provider: Any) -> list[dict[str, Any]]:
    logs = provider.logs(stdout=True, stderr=False).decode()
    return [json.loads(line) for line in logs.splitlines() if line.startswith("{")]


def test_direct_mode_calls_the_provider_from_the_worker(direct_box: Any, canary: str) -> None:
    server, provider = direct_box(
        "greeting",
        {"name": "write", "arguments": {"path": "hello.txt", "content": "Hello, exam hall!"}},
    )
    created = server.submit(
        suite="smoke",
        cases=["create-greeting"],
        model={"provider": "fakeai", "id": "gpt-direct"},
        credentials="direct",
    )
    server.wait(created["id"])
    (trial,) = server.http.get(f"/v1/jobs/{created['id']}/trials").json()
    assert trial["outcome"] == "passed", (trial["error_kind"], trial["error_message"])
    assert trial["model_returned"] == "direct-test-1"
    assert [r["auth"] for r in _received(provider)] == [f"Bearer {canary}"] * 2
    events = server.http.get(f"/v1/trials/{trial['id']}/events").text
    assert "(direct)" in events and canary not in events
    report = server.http.get(f"/v1/jobs/{created['id']}/report").text
    assert canary not in report and canary not in json.dumps(trial)


def test_direct_mode_key_cannot_be_found_from_inside(direct_box: Any, canary: str) -> None:
    server, _provider = direct_box(
        "attack", {"name": "bash", "arguments": {"command": canary_search_command()}}
    )
    created = server.submit(
        suite=canary_search_suite("canary-direct"),
        cases=["canary-direct"],
        model={"provider": "fakeai", "id": "gpt-direct"},
        credentials="direct",
    )
    server.wait(created["id"])
    (trial,) = server.http.get(f"/v1/jobs/{created['id']}/trials").json()
    events = server.http.get(f"/v1/trials/{trial['id']}/events").json()
    output = next(e["payload"]["content"] for e in events if e["type"] == "tool_result")
    result = canary_search_result(output)
    # The key is in the worker's memory for this trial, and still nowhere a tool can read.
    assert result["find_canary"] == {"ok": False, "errno": "ENOENT"}
    assert result["worker_mem"] == {"ok": False, "errno": "EACCES"}
    assert trial["outcome"] == "passed"
    assert canary not in json.dumps(events)


def test_a_hostile_suite_finds_no_key_at_import_or_judging(direct_box: Any, canary: str) -> None:
    """In direct mode the key is in the container, in the root supervisor's memory only: the
    suite, imported and judged in the worker forked before the key arrived, cannot find it."""
    server, provider = direct_box("hostile", {"name": "ls", "arguments": {"path": "."}})
    created = server.submit(
        suite=hostile_suite(),
        cases=["search"],
        model={"provider": "fakeai", "id": "gpt-direct"},
        credentials="direct",
    )
    server.wait(created["id"])
    at_import, at_judging = hostile_findings(server, created["id"])
    assert [r["auth"] for r in _received(provider)] == [f"Bearer {canary}"] * 2
    assert HOSTILE_PLANTED in at_import and HOSTILE_PLANTED in at_judging
    assert canary not in at_import and canary not in at_judging
