"""The Swarm backend's warm pool: a slot is a started one-replica service, placed by Swarm.

A slot's service is made from exactly the task template a trial's own would have
(spec.py: the same image, limits, network and hardening), its container attached on its
node's engine and started: its worker has cut its network and confined itself, and waits
for its one request (sandbox/supervisor.py `_hand_over`). So a trial that takes one skips
what makes a Swarm trial slower than a Docker one: the manager's dispatch, the node's
preparing the task and joining the network, and the start.

Which configurations to keep, for which team, how many, within the box's room and the
teams' caps and for how long, service/backends/pool_keeper.py decides, as for the Docker
backend's pool. A slot's service and container carry the owner, the pool label and a
`pool-` trial id of their own (`slot_labels`), so the reaper finds them like a trial's and
the plane that keeps them spares them. A slot's node may be drained or lost while it
waits: a slot is handed out only if its node is ready, not one the backend avoids, and its
container still runs.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

import docker

from service.backends.docker.attach import AttachChannel
from service.backends.pool_keeper import Config, PoolKeeper, SlotOps, slot_labels

if TYPE_CHECKING:
    from service.backends.swarm.backend import SwarmBackend


@dataclass
class Placed:
    """A started service and its attached container: a trial's, or a slot's until one
    takes it."""

    name: str
    node: str
    engine: docker.DockerClient
    container_id: str
    channel: AttachChannel
    timings: dict[str, float]


def service_pool(backend: SwarmBackend, *, size: int, idle_s: float) -> PoolKeeper[Placed]:
    def start(config: Config) -> Placed:
        # Placed again as a trial is when a node fails to start it (a node that has not yet
        # made the sandboxes' network refuses a first container on it now and then).
        return backend.place(config, slot_labels(config["labels"]))

    def discard(slot: Placed) -> None:
        with contextlib.suppress(Exception):
            slot.channel.close()
        down = backend.is_down(slot.node)
        backend.remove_sandbox(slot.name, {} if down else {slot.node: slot.engine})

    def usable(slot: Placed) -> bool:
        # The node first: a lost node's engine would only answer after its timeout.
        if backend.node_trouble(slot.node) is not None or slot.node in backend.avoided():
            return False
        state = slot.engine.api.inspect_container(slot.container_id)["State"]
        return bool(state.get("Running"))

    ops = SlotOps(start=start, discard=discard, usable=usable, ident=lambda slot: slot.name)
    return PoolKeeper(ops, size=size, idle_s=idle_s)
