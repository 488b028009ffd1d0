"""A real control plane for the HTTP tests: uvicorn on a loopback port, SQLite on disk."""

from __future__ import annotations

import json
import socket
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

from evals import probes
from service.api.app import create_app
from service.backends.docker import DockerBackend


@dataclass
class Server:
    url: str
    database_url: str
    http: httpx.Client
    stop: Callable[[], None]

    def submit(self, **body: Any) -> dict[str, Any]:
        response = self.http.post("/v1/jobs", json=body)
        assert response.status_code == 201, response.text
        created: dict[str, Any] = response.json()
        return created

    def wait(self, job_id: str, timeout: float = 300.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            job: dict[str, Any] = self.http.get(f"/v1/jobs/{job_id}").json()
            if job["status"] == "finished":
                return job
            time.sleep(0.2)
        raise AssertionError(f"job {job_id} did not finish in {timeout} s")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.fixture
def start_server(tmp_path: Path, sandbox_image: str) -> Iterator[Callable[..., Server]]:
    """Start control planes; each is stopped (and its scheduler drained) after the test."""
    running: list[tuple[uvicorn.Server, threading.Thread, httpx.Client]] = []

    def start(
        *, max_containers: int = 2, make_backend: Callable[[str], DockerBackend] | None = None
    ) -> Server:
        database_url = f"sqlite:///{tmp_path / f'examhall-{len(running)}.db'}"
        app = create_app(database_url, max_containers=max_containers, make_backend=make_backend)
        port = free_port()
        server = uvicorn.Server(
            uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")
        )
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        deadline = time.monotonic() + 120
        while not server.started:
            assert thread.is_alive() and time.monotonic() < deadline, "server did not start"
            time.sleep(0.05)
        http = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=120)
        running.append((server, thread, http))

        def stop() -> None:
            http.close()
            server.should_exit = True
            thread.join(timeout=60)

        return Server(f"http://127.0.0.1:{port}", database_url, http, stop)

    yield start
    for server, thread, http in running:
        http.close()
        server.should_exit = True
        thread.join(timeout=60)


PROVIDER_KEY_ENV = "EXAMHALL_TEST_PROVIDER_KEY"


@pytest.fixture
def canary(monkeypatch: pytest.MonkeyPatch) -> str:
    """A unique secret set as the test provider's key: it must never be seen again."""
    value = f"exh-canary-{uuid.uuid4().hex}"
    monkeypatch.setenv(PROVIDER_KEY_ENV, value)
    return value


def canary_search_suite(case_id: str) -> dict[str, str]:
    """evals/probes.py plus a case whose model (scripted by the test's provider) runs the
    canary search; uploaded whole, as users upload suites."""
    source = Path(probes.__file__).read_text()
    source += (
        f"\nCASES.append(Case(id={case_id!r}, input='Find the key.', tools=('bash',),"
        " judges=[expect('canary', {'find_canary': ('ENOENT',)})]))\n"
    )
    return {"name": "probes", "source": source}


def canary_search_command() -> str:
    program = probes.PRELUDE + probes.CANARY + probes.EPILOGUE
    return f"python3 - <<'P'\n{program}\nP"


def canary_search_result(output: str) -> dict[str, Any]:
    result: dict[str, Any] = json.loads(output.split(probes.MARKER, 1)[1].splitlines()[0])
    return result
