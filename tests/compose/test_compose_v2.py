"""The box under Compose v2 as well as v1: `docker compose up` to healthy, a team made with
`compose exec`, then `docker compose down -v`, leaving nothing of the project behind.

This machine's compose is v1, so Compose v2 runs in a container of Debian trixie, whose
`docker-compose` package is 2.x (service/images/compose_v2.py, built once and then reused),
with the engine's socket mounted, as bench/_harbor.py runs Harbor. The checkout and the
box's env file are mounted at their own paths, so the paths compose hands to the engine
mean the same there. The images are `examhall box build`'s, which tests/compose/
test_compose.py builds too; only the compose client differs, so no job runs here.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from pathlib import Path

import docker
import docker.errors
import pytest

from service.images.compose_v2 import compose_v2_image
from tests.compose.test_compose import (
    PROJECT_LABEL,
    REPO,
    Box,
    _progress,
    box_build,
    box_env,
    compose_args,
    up_to_healthy,
)

pytestmark = [pytest.mark.docker, pytest.mark.timeout(900)]

SOCKET = "/var/run/docker.sock"
# What compose writes on everything it creates: the version that created it.
VERSION_LABEL = "com.docker.compose.version"
# On the compose client's own containers, by the project they work on.
CLIENT_LABEL = "examhall-test.compose-client"


@pytest.fixture(scope="module")
def compose_v2(docker_client: docker.DockerClient) -> str:
    return compose_v2_image(docker_client, _progress)


def _in_container(image: str, env_file: Path, env: dict[str, str], project: str) -> list[str]:
    """`docker compose`, v2, run in a container of `image` against this engine."""
    passed = [f"EXAMHALL_{name}" for name in ("ENV_FILE", "BIND", "PORT")]
    return [
        "docker", "run", "--rm", "--network", "none", "--label", f"{CLIENT_LABEL}={project}",
        "-v", f"{SOCKET}:{SOCKET}", "-v", f"{REPO}:{REPO}:ro",
        "-v", f"{env_file.parent}:{env_file.parent}", "-w", str(REPO),
        *(arg for name in passed for arg in ("-e", f"{name}={env[name]}")),
        image, "docker", "compose", *compose_args(env_file, project),
    ]  # fmt: skip


def _project_leftovers(client: docker.DockerClient, project: str) -> list[str]:
    labelled = {"label": f"{PROJECT_LABEL}={project}"}
    return [
        *(f"container {c.name}" for c in client.containers.list(all=True, filters=labelled)),
        *(f"volume {v.name}" for v in client.volumes.list(filters=labelled)),
        *(f"network {n.name}" for n in client.networks.list(filters=labelled)),
    ]


@pytest.fixture
def box_v2(compose_v2: str, tmp_path: Path, docker_client: docker.DockerClient) -> Iterator[Box]:
    """A box on SQLite whose compose commands are Compose v2's; afterwards whatever carries
    its project's label is removed, by that label."""
    project = f"examhall-test-v2-{uuid.uuid4().hex[:8]}"
    env_file, env, port = box_env(tmp_path)
    compose = _in_container(compose_v2, env_file, env, project)
    try:
        token = box_build(env_file, env)
        yield Box(project, "sqlite", compose, env, f"http://127.0.0.1:{port}", token, "")
    finally:
        client = {"label": f"{CLIENT_LABEL}={project}"}
        for container in docker_client.containers.list(all=True, filters=client):
            with contextlib.suppress(docker.errors.APIError):
                container.remove(force=True)
        labelled = {"label": f"{PROJECT_LABEL}={project}"}
        for container in docker_client.containers.list(all=True, filters=labelled):
            with contextlib.suppress(docker.errors.APIError):
                container.remove(force=True, v=True)
        for volume in docker_client.volumes.list(filters=labelled):
            with contextlib.suppress(docker.errors.APIError):
                volume.remove(force=True)
        for network in docker_client.networks.list(filters=labelled):
            with contextlib.suppress(docker.errors.APIError):
                network.remove()


def test_compose_v2_brings_the_box_up_to_healthy_and_down(
    box_v2: Box, docker_client: docker.DockerClient
) -> None:
    version = box_v2.run("version", "--short").strip()
    assert version.startswith("2."), version

    control_plane = up_to_healthy(box_v2, docker_client)
    # Made by Compose v2, from the env file, with the socket: as under v1.
    made_by = control_plane.labels[VERSION_LABEL]  # "2.26.1" of Debian's "2.26.1-4"
    assert made_by.startswith("2.") and version.startswith(made_by), (made_by, version)
    assert "EXAMHALL_MAX_CONTAINERS=2" in control_plane.attrs["Config"]["Env"]
    assert any(m["Destination"] == SOCKET for m in control_plane.attrs["Mounts"])
    # A team and its token, made through Compose v2's exec.
    box_v2.run("exec", "-T", "examhall", "examhall", "admin", "create-team", "alpha")
    token = box_v2.run("exec", "-T", "examhall", "examhall", "admin", "create-token", "alpha")
    with box_v2.client(token.strip().splitlines()[-1]) as team:
        jobs = team.get("/v1/jobs")
    assert jobs.status_code == 200 and jobs.json() == [], jobs.text

    box_v2.run("down", "-v")
    assert _project_leftovers(docker_client, box_v2.project) == []
