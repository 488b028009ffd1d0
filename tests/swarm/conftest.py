"""The swarm tests' fixtures: one test swarm per session, torn down at its end.

These tests are marked `swarm`; the fast local suite leaves them out with `-m "not swarm"`,
CI runs them. A swarm that cannot start fails the tests (it does not skip them): a suite that
quietly skips its cluster tests proves nothing.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

import docker
import docker.errors
import pytest

from service.backends.swarm import SwarmBackend
from service.images.debian_base import ImageBuildError
from tests.swarm.backends import swarm_backend
from tests.swarm.cluster import Cluster, ClusterError, push_sandbox_image, reap_orphans


def _to_stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def host_swarm_state(client: docker.DockerClient) -> dict[str, Any]:
    """Whether the host engine is in a swarm, and which: what the test swarm must not change.
    (Another process may use the host's own swarm meanwhile, so its spec may change.)"""
    swarm: dict[str, Any] = client.info().get("Swarm") or {}
    return {
        "LocalNodeState": swarm.get("LocalNodeState"),
        "NodeID": swarm.get("NodeID"),
        "ClusterID": (swarm.get("Cluster") or {}).get("ID"),
    }


@pytest.fixture(scope="session")
def host_swarm_before(docker_client: docker.DockerClient) -> dict[str, Any]:
    """The host engine's swarm state before any test swarm started, to compare with after."""
    return host_swarm_state(docker_client)


@pytest.fixture(scope="session")
def swarm_cluster(
    docker_client: docker.DockerClient, host_swarm_before: dict[str, Any]
) -> Iterator[Cluster]:
    """A 3-node swarm (node-1 the manager) with its registry, for the whole session."""
    for label in reap_orphans(docker_client):
        _to_stderr(f"Removed test swarm {label}, left behind by a process that died.")
    try:
        cluster = Cluster.start(docker_client, nodes=3, progress=_to_stderr)
    except (ClusterError, ImageBuildError, docker.errors.DockerException) as exc:
        pytest.fail(
            f"The test swarm could not start: {exc}\nThe swarm tests need a Docker engine that "
            f"can run nested engines (see NODE_RUN_OPTIONS in tests/swarm/cluster.py); to run "
            f"the rest of the suite without them, add -m 'not swarm'.",
            pytrace=False,
        )
    try:
        yield cluster
    finally:
        cluster.teardown()


@pytest.fixture(scope="session")
def swarm_sandbox_image(swarm_cluster: Cluster, docker_client: docker.DockerClient) -> str:
    """The sandbox image, pushed to the swarm's registry: the reference the nodes pull."""
    return push_sandbox_image(swarm_cluster, docker_client, progress=_to_stderr)


@pytest.fixture(scope="session")
def backend(
    swarm_cluster: Cluster, docker_client: docker.DockerClient, sandbox_image: str
) -> SwarmBackend:
    """This directory's backend: Swarm on the test swarm, with a scope of this run's own.
    The Docker backend's tests imported here (the contract, the probes) run on it."""
    return swarm_backend(swarm_cluster, docker_client, sandbox_image)
