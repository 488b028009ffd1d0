"""The swarm's nodes: which are usable, and how to reach each one's own engine.

A trial's channel is its container's attach stream, and only the engine of the node the
container runs on can attach to it (the manager cannot). Each node names its engine in a
node label, `examhall.engine=tcp://HOST:PORT` (set once with `docker node update
--label-add`); the control plane reaches it with the TLS settings of its environment
(DOCKER_TLS_VERIFY, DOCKER_CERT_PATH), as the docker CLI would. The manager's own node needs
no label: its engine is the manager's.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

import docker
import docker.errors
from docker.utils import kwargs_from_env

from service.backends.base import NodeStatus, SandboxError

ENGINE_LABEL = "examhall.engine"
# How long a call to a node's engine may take before it counts as unreachable.
ENGINE_TIMEOUT_S = 30


@dataclass(frozen=True)
class Node:
    id: str
    name: str
    # ready: takes trials; drained: an operator took it out; down: the manager lost it.
    state: str
    engine_url: str | None


def node_state(node: dict[str, Any]) -> str:
    if node.get("Status", {}).get("State") != "ready":
        return "down"
    if node.get("Spec", {}).get("Availability") != "active":
        return "drained"
    return "ready"


def read_nodes(manager: docker.DockerClient) -> list[Node]:
    return [
        Node(
            id=str(node["ID"]),
            name=str(node.get("Description", {}).get("Hostname") or node["ID"]),
            state=node_state(node),
            engine_url=(node.get("Spec", {}).get("Labels") or {}).get(ENGINE_LABEL),
        )
        for node in manager.api.nodes()
    ]


def node_statuses(nodes: list[Node], trials_by_node: dict[str, int]) -> list[NodeStatus]:
    return [
        NodeStatus(name=n.name, state=n.state, trials=trials_by_node.get(n.id, 0))
        for n in sorted(nodes, key=lambda n: n.name)
    ]


class NodeEngines:
    """A client of each node's engine, made on first use and kept."""

    def __init__(self, manager: docker.DockerClient) -> None:
        self.manager = manager
        self._own_node = str(manager.info().get("Swarm", {}).get("NodeID") or "")
        self._clients: dict[str, docker.DockerClient] = {}
        self._lock = threading.Lock()

    def client(self, node_id: str) -> docker.DockerClient:
        if node_id == self._own_node:
            return self.manager
        with self._lock:
            found = self._clients.get(node_id)
        if found is not None:
            return found
        try:
            node = self.manager.api.inspect_node(node_id)
        except docker.errors.DockerException as exc:
            raise SandboxError(
                f"The swarm manager could not describe node {node_id}: {exc}"
            ) from None
        name = node.get("Description", {}).get("Hostname") or node_id
        url = (node.get("Spec", {}).get("Labels") or {}).get(ENGINE_LABEL)
        if not url:
            raise SandboxError(
                f"Swarm node {name} does not say how to reach its engine: label it with "
                f"`docker node update --label-add {ENGINE_LABEL}=tcp://HOST:2376 {name}`."
            )
        tls = kwargs_from_env().get("tls", False)
        client = docker.DockerClient(base_url=url, tls=tls, timeout=ENGINE_TIMEOUT_S)
        with self._lock:
            return self._clients.setdefault(node_id, client)

    def forget(self, node_id: str) -> None:
        """Drop a node's client (its engine went away); the next use makes a new one."""
        with self._lock:
            client = self._clients.pop(node_id, None)
        if client is not None:
            client.close()
