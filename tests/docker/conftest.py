"""A real control plane for the HTTP tests: uvicorn on a loopback port, SQLite on disk."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from sqlalchemy import select

from evals import probes
from service.app import create_app
from service.backends.base import SandboxBackend
from service.settings import Settings
from service.store.db import make_engine, session_factory
from service.store.models import Team
from service.teams import create_team, create_token


@dataclass
class Server:
    url: str
    database_url: str
    http: httpx.Client  # sends the admin token
    stop: Callable[[], None]
    token: str  # the box's admin token

    def team_token(
        self,
        team: str,
        max_containers: int | None = None,
        egress: list[str] | None = None,
        share: int | None = None,
    ) -> str:
        """A token of `team`, created (with its cap) on first use, as `examhall admin` does."""
        engine = make_engine(self.database_url)
        try:
            with session_factory(engine).begin() as session:
                found = session.scalar(select(Team).where(Team.name == team))
                if found is None:
                    found = create_team(session, team, max_containers, egress, share)
                return create_token(session, found)
        finally:
            engine.dispose()

    def as_team(self, token: str) -> httpx.Client:
        return httpx.Client(
            base_url=self.url, timeout=120, headers={"Authorization": f"Bearer {token}"}
        )

    def submit(self, **body: Any) -> dict[str, Any]:
        response = self.http.post("/v1/jobs", json=body)
        assert response.status_code == 201, response.text
        created: dict[str, Any] = response.json()
        return created

    def wait(self, job_id: str, timeout: float = 300.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            job: dict[str, Any] = self.http.get(f"/v1/jobs/{job_id}").json()
            if job["status"] in ("finished", "cancelled"):
                return job
            time.sleep(0.2)
        raise AssertionError(f"job {job_id} did not finish in {timeout} s")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def serve_process(
    database_url: str,
    port: int,
    log: Path,
    *,
    token: str,
    max_containers: int,
    env: dict[str, str] | None = None,
) -> subprocess.Popen[bytes]:
    """`examhall serve` in a process of its own, as on a box, its output appended to `log`;
    `env` adds to (or overrides) this process's environment."""
    env = {
        **os.environ,
        **(env or {}),
        "EXAMHALL_DATABASE_URL": database_url,
        "EXAMHALL_MAX_CONTAINERS": str(max_containers),
        "EXAMHALL_ADMIN_TOKEN": token,
    }
    return subprocess.Popen(
        [sys.executable, "-m", "service.cli", "serve", "--port", str(port)],
        env=env,
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
    )


def wait_for(predicate: Callable[[], object], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture
def processes() -> Iterator[list[subprocess.Popen[bytes]]]:
    """Control planes a test started as processes (serve_process): ended after the test."""
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for process in started:
        if process.poll() is None:
            process.terminate()
            process.wait(timeout=60)


def wait_healthy(process: subprocess.Popen[bytes], port: int, log: Path) -> None:
    """Until /healthz answers: migrations ran, and the store and the engine are reachable."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        assert process.poll() is None, log.read_text()[-3000:]
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise AssertionError(f"the control plane did not start:\n{log.read_text()[-3000:]}")


def serve(
    database_url: str,
    *,
    max_containers: int = 2,
    make_backend: Callable[[], SandboxBackend] | None = None,
    settings: Settings | None = None,
) -> Server:
    """A control plane on a loopback port, in a thread of this process, with an admin token."""
    token = f"exh_test_admin_{uuid.uuid4().hex}"
    app = create_app(
        database_url,
        max_containers=max_containers,
        make_backend=make_backend,
        admin_token=token,
        settings=settings,
    )
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 120
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "server did not start"
        time.sleep(0.05)
    url = f"http://127.0.0.1:{port}"
    http = httpx.Client(base_url=url, timeout=120, headers={"Authorization": f"Bearer {token}"})

    def stop() -> None:
        http.close()
        server.should_exit = True
        thread.join(timeout=60)

    return Server(url, database_url, http, stop, token)


@pytest.fixture
def start_server(tmp_path: Path, sandbox_image: str) -> Iterator[Callable[..., Server]]:
    """Start control planes; each is stopped (and its scheduler drained) after the test."""
    running: list[Server] = []

    def start(**kwargs: Any) -> Server:
        database_url = f"sqlite:///{tmp_path / f'examhall-{len(running)}.db'}"
        running.append(serve(database_url, **kwargs))
        return running[-1]

    yield start
    for server in running:
        server.stop()


PROVIDER_KEY_ENV = "EXAMHALL_TEST_PROVIDER_KEY"


@pytest.fixture
def canary(monkeypatch: pytest.MonkeyPatch) -> str:
    """A unique secret set as the test provider's key: it must never be seen again."""
    value = f"exh-canary-{uuid.uuid4().hex}"
    monkeypatch.setenv(PROVIDER_KEY_ENV, value)
    return value


def use_loopback_provider(url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A providers file naming `fakeai`, an OpenAI-kind provider at `url` (a provider_server)
    keyed by the canary, for the control planes this test starts next."""
    providers = tmp_path / "providers.toml"
    providers.write_text(
        f'[providers.fakeai]\nkind = "openai"\nbase_url = "{url}/v1"\n'
        f'key_env = "{PROVIDER_KEY_ENV}"\n'
    )
    monkeypatch.setenv("EXAMHALL_PROVIDERS", str(providers))


def canary_search_suite(case_id: str) -> dict[str, str]:
    """evals/probes.py plus a case whose model (scripted by the test's provider) runs the
    canary search; uploaded whole, as users upload suites."""
    source = Path(probes.__file__).read_text()
    source += (
        f"\nCASES.append(Case(id={case_id!r}, input='Find the key.', tools=('bash',),"
        " judges=[expect('canary', {'find_canary': ('ENOENT',)})]))\n"
    )
    return {"name": "probes", "source": source}


HOSTILE_SUITE = Path(__file__).parent.parent / "suites" / "hostile_credentials.py"
# The look-alike the hostile suite plants in its own memory (its PLANTED).
HOSTILE_PLANTED = "exh-canary-" + "0" * 32


def hostile_suite() -> dict[str, str]:
    """tests/suites/hostile_credentials.py, uploaded as a team would."""
    return {"name": "hostile_credentials", "source": HOSTILE_SUITE.read_text()}


def hostile_findings(server: Server, job_id: str) -> tuple[str, str]:
    """What the hostile suite found at import (in the prompt) and at judging (the detail)."""
    (trial,) = server.http.get(f"/v1/jobs/{job_id}/trials").json()
    assert trial["outcome"] == "passed", (trial["error_kind"], trial["error_message"])
    events = server.http.get(f"/v1/trials/{trial['id']}/events").json()
    prompt = next(e["payload"]["content"] for e in events if e["type"] == "message")
    return prompt, trial["judges"][0]["detail"]


def canary_search_command() -> str:
    program = probes.PRELUDE + probes.CANARY + probes.EPILOGUE
    return f"python3 - <<'P'\n{program}\nP"


def canary_search_result(output: str) -> dict[str, Any]:
    result: dict[str, Any] = json.loads(output.split(probes.MARKER, 1)[1].splitlines()[0])
    return result
