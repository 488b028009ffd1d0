"""Shared fixtures. The Docker ones are session-scoped: one client, one sandbox image build."""

from __future__ import annotations

import sys
from collections.abc import Iterator

import docker
import docker.errors
import pytest

from service.images import ensure_sandbox_image


def _to_stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


@pytest.fixture(scope="session")
def docker_client() -> Iterator[docker.DockerClient]:
    try:
        client = docker.from_env()
        client.ping()
    except docker.errors.DockerException as exc:
        # Failing, not skipping: a suite that quietly skips its sandbox tests proves nothing.
        pytest.fail(f"the Docker engine is not reachable ({exc}); start it or deselect -m docker")
    yield client
    client.close()


@pytest.fixture(scope="session")
def sandbox_image(docker_client: docker.DockerClient) -> str:
    """A reference to an up-to-date sandbox image (built on first use, reused afterwards)."""
    return ensure_sandbox_image(docker_client, progress=_to_stderr)
