"""A warm pool of trial containers, started ahead so that a trial skips create and start.

A slot is a container created from exactly the configuration a trial's own would have (the
same image, limits, network, runtime and hardening, `hardening.container_config`), attached
and started: its worker has cut its network and confined itself if asked, checked it is
root, forked, and now waits for its one request on the channel (sandbox/worker.py,
sandbox/supervisor.py `_hand_over`). No suite or agent code has run in it, and it holds no
credential: those come with the request, which only the trial that takes it sends. A slot
is taken once and never returned; the trial's removal of its sandbox removes it.

A slot carries a trial label of its own (`POOL_PREFIX` and a random id), the owner and the
pool label, so the reaper finds it like any sandbox. Which configurations the pool keeps,
for which team, how many, within the box's room and the teams' caps and for how long,
service/backends/pool_keeper.py decides, as it does for the Swarm backend's pool; this
module says what a slot is on one engine.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any

import docker

from service.backends.docker.attach import AttachChannel
from service.backends.docker.removal import remove
from service.backends.pool_keeper import Config, PoolKeeper, SlotOps, slot_labels


@dataclass
class Slot:
    container: Any
    channel: AttachChannel


class ContainerPool(PoolKeeper[Slot]):
    def __init__(self, client: docker.DockerClient, *, size: int, idle_s: float) -> None:
        self.client = client
        ops = SlotOps(
            start=self._start,
            discard=_discard,
            usable=_running,
            ident=lambda slot: str(slot.container.id),
        )
        super().__init__(ops, size=size, idle_s=idle_s)

    def _start(self, config: Config) -> Slot:
        container = self.client.containers.create(
            **{**config, "labels": slot_labels(config["labels"])}
        )
        channel = None
        try:
            sock = self.client.api.attach_socket(
                str(container.id), params={"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1}
            )
            channel = AttachChannel(sock)
            container.start()
        except Exception:
            if channel is not None:
                channel.close()
            _remove(container)
            raise
        return Slot(container, channel)


def _running(slot: Slot) -> bool:
    """Whether a slot's container still runs (an engine restart or an OOM may end it)."""
    try:
        slot.container.reload()
        return bool(slot.container.attrs["State"].get("Running"))
    except Exception:
        return False


def _discard(slot: Slot) -> None:
    slot.channel.close()
    _remove(slot.container)


def _remove(container: Any) -> None:
    with contextlib.suppress(Exception):  # `remove` never raises; a slot's removal neither
        remove(container)
