"""A real control plane for the HTTP tests: uvicorn on a loopback port, SQLite on disk."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn

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
