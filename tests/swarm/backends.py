"""The Swarm backend on a test cluster, as the tests and the benchmarks make it."""

from __future__ import annotations

import time
import uuid
from typing import Any

import docker

from service.backends.swarm import SwarmBackend, SwarmSettings, connect
from service.backends.swarm.images import ImagePublisher
from tests.swarm.cluster import Cluster


def swarm_backend(
    cluster: Cluster,
    local: docker.DockerClient,
    sandbox_image: str,
    scope: str | None = None,
    **settings: Any,
) -> SwarmBackend:
    """A backend whose manager is the cluster's node-1 and whose images go through the
    cluster's registry, with a scope of its own (its reaps touch only what it started), and
    any other of its `settings` (a warm pool's)."""
    publisher = ImagePublisher(local, cluster.registry_push, cluster.registry_pull)
    image = publisher.publish(sandbox_image)
    config = SwarmSettings(
        image=image,
        scope=scope or f"tests-{uuid.uuid4().hex[:12]}",
        local_image=sandbox_image,
        **settings,
    )
    return SwarmBackend(config, connect(cluster.manager_url), publisher)


def leftovers(backend: SwarmBackend, cluster: Cluster, timeout_s: float = 30.0) -> list[str]:
    """What of `backend`'s sandboxes is still on the swarm once removals have settled
    (a removed network lingers in listings for a moment): services, networks, and
    containers and volumes on every live node."""
    scope = f"examhall.scope={backend.settings.scope}"
    deadline = time.monotonic() + timeout_s
    while True:
        left = [
            f"service {s['Spec']['Name']}" for s in backend.swarm.services(filters={"label": scope})
        ]
        left += [f"network {n['Name']}" for n in backend.swarm.networks(filters={"label": scope})]
        for node in cluster.nodes:
            if node.container.reload() or node.container.status != "running":
                continue
            left += [
                f"container {c.name} on {node.name}"
                for c in node.client.containers.list(all=True, filters={"label": scope})
            ]
            left += [
                f"volume {v.name} on {node.name}"
                for v in node.client.volumes.list(filters={"label": scope})
            ]
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.5)
