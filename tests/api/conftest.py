"""A real control plane over real HTTP (uvicorn on a loopback port, SQLite on disk) whose
backend is the fake one: the API's own behaviour, without a sandbox. A test here that makes
the control plane start a sandbox fails."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from service.backends.fake import FakeBackend, FakeWorker
from tests.docker.conftest import Server, serve


def _no_sandbox(worker: FakeWorker) -> int:
    raise AssertionError(f"an API test started a sandbox for {worker.launch.trial_id}")


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    running = serve(
        f"sqlite:///{tmp_path / 'examhall.db'}", make_backend=lambda: FakeBackend(_no_sandbox)
    )
    yield running
    running.stop()
