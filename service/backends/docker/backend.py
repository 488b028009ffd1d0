"""The Docker backend: one fresh, hardened container per trial on the local engine.

The worker's channel is the container's attached stdin and stdout; the container is removed
in every case. Which containers are examhall's, and whose, the labels say. With a warm pool
(pool.py, `EXAMHALL_POOL_SIZE`), a trial may take a container of its own configuration that
was started ahead and whose worker waits for its request.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import docker
import docker.errors
from docker.types import LogConfig

from service.backends.base import (
    Channel,
    FoundSandbox,
    LaunchSpec,
    NodeStatus,
    ReapPolicy,
    Resources,
    SandboxError,
    SandboxExit,
)
from service.backends.docker.attach import AttachChannel
from service.backends.docker.hardening import (
    LABEL_JOB,
    LABEL_OWNER,
    LABEL_PROBE,
    LABEL_SCOPE,
    LABEL_TRIAL,
    OOM_CAP,
    WORKER_CAPS,
    container_config,
    task_caps,
)
from service.backends.docker.pool import ContainerPool
from service.backends.docker.removal import remove
from service.backends.pool_keeper import KeepsPoolOf
from service.images.docker_engine import DockerImageEngine
from service.images.engine import ImageEngine
from service.owners import instance_id
from service.settings import get_settings

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DockerSettings:
    image: str
    resources: Resources = field(default_factory=Resources)
    # e.g. "runsc" for gVisor; None is the engine's default runtime.
    runtime: str | None = None
    network: str = "none"
    # For direct-credentials trials, which call their provider themselves.
    direct_network: str = field(default_factory=lambda: get_settings().direct_network)
    owner: str = field(default_factory=instance_id)
    # When set, containers carry it as a label and `reap` looks at no other container: a test
    # run gives itself a scope of its own, so that on an engine shared with live control
    # planes (or other test runs) it can only ever remove what it started.
    scope: str | None = None
    # False: the engine applies neither no-new-privileges nor a seccomp profile, and the worker
    # confines itself with the same profile (sandbox/confine.py), as it must under Swarm.
    engine_confinement: bool = True
    # Containers kept started ahead for each configuration trials use (pool.py); 0: none.
    pool_size: int = field(default_factory=lambda: get_settings().pool_size)
    pool_idle_s: float = field(default_factory=lambda: get_settings().pool_idle_s)


class DockerSandbox:
    def __init__(
        self,
        container: Any,
        channel: AttachChannel,
        timings: dict[str, float],
        node: str | None = None,
    ) -> None:
        self.container = container
        self.id = str(container.id)
        self.node = node
        self.channel: Channel = channel
        self.timings = timings

    def kill(self) -> None:
        # Already gone is fine, and so is an engine too slow to answer (docker-py lets the
        # requests ReadTimeout through unwrapped): removal, or the reaper, follows.
        try:
            self.container.kill()
        except docker.errors.DockerException:
            pass  # gone already, or no longer running
        except Exception as exc:
            log.warning("container %s: kill failed (%s); its removal follows", self.id, exc)

    def wait(self, timeout_s: float) -> SandboxExit:
        try:
            state = self.container.wait(timeout=timeout_s)
            self.container.reload()
        except Exception as exc:  # the daemon may have lost the container
            raise SandboxError(f"Could not read the container's exit state: {exc}") from exc
        ended = self.container.attrs["State"]
        return SandboxExit(
            exit_code=int(state.get("StatusCode", -1)),
            oom_killed=bool(ended.get("OOMKilled")),
            engine_error=ended.get("Error") or None,
        )

    def remove(self) -> None:
        # The attach stream goes first: an engine blocked writing to it can hold the removal.
        self.channel.close()
        remove(self.container)


class DockerBackend(KeepsPoolOf):
    name = "docker"

    def __init__(
        self,
        settings: DockerSettings,
        client: docker.DockerClient | None = None,
        image_digest: str | None = None,
    ) -> None:
        self.settings = settings
        self.client = client or docker.from_env()
        self.image = settings.image
        self.image_digest = image_digest
        self.owner = settings.owner
        self._lock = threading.Lock()
        self._caps: list[str] | None = None
        self._engine_name: str | None = None
        self.pool: ContainerPool | None = None
        if settings.pool_size > 0:
            self.pool = ContainerPool(
                self.client, size=settings.pool_size, idle_s=settings.pool_idle_s
            )

    def start(self, launch: LaunchSpec) -> DockerSandbox:
        config = self.container_config(launch)
        if self.pool is not None:
            t0 = time.monotonic()
            slot = self.pool.take(config, launch.trial_id, launch.team_id)
            if slot is not None:
                timings = {"pool_take": time.monotonic() - t0}
                return DockerSandbox(slot.container, slot.channel, timings, self.engine_name())
        container = channel = None
        t0 = time.monotonic()
        try:
            container = self.client.containers.create(**config)
            sock = self.client.api.attach_socket(
                str(container.id), params={"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1}
            )
            channel = AttachChannel(sock)
            t1 = time.monotonic()
            container.start()
            timings = {"create": t1 - t0, "start": time.monotonic() - t1}
            return DockerSandbox(container, channel, timings, self.engine_name())
        except Exception as exc:
            # Whatever failed (the engine's refusal, or its client timing out on a busy
            # engine, which docker-py does not wrap), nothing of the launch may stay behind.
            if channel is not None:
                channel.close()
            if container is not None:
                remove(container)
            raise SandboxError(f"The trial's container could not start: {exc}") from exc

    def container_config(self, launch: LaunchSpec) -> dict[str, Any]:
        s = self.settings
        labels = {LABEL_TRIAL: launch.trial_id, LABEL_JOB: launch.job_id, LABEL_OWNER: s.owner}
        if s.scope is not None:
            labels[LABEL_SCOPE] = s.scope
        resources = dataclasses.replace(
            s.resources,
            memory_bytes=launch.memory_bytes or s.resources.memory_bytes,
            cpus=launch.cpus or s.resources.cpus,
            workspace_bytes=launch.workspace_bytes or s.resources.workspace_bytes,
        )
        return container_config(
            image=launch.image or s.image,
            resources=resources,
            network=s.direct_network if launch.egress else s.network,
            caps=(
                task_caps(self.worker_caps(), offline=not launch.egress)
                if launch.image is not None
                else self.worker_caps()
            ),
            labels=labels,
            runtime=s.runtime,
            task_dirs=launch.image is not None,
            engine_confinement=s.engine_confinement,
        )

    def build_engine(self) -> tuple[ImageEngine, str]:
        return DockerImageEngine(self.client), self.image

    def engine_name(self) -> str | None:
        """The engine's host name, asked once: the one node this backend has."""
        if self._engine_name is None:
            with contextlib.suppress(Exception):  # a name is a nicety, not a reason to fail
                self._engine_name = str(self.client.info().get("Name") or "") or None
        return self._engine_name

    def worker_caps(self) -> list[str]:
        """WORKER_CAPS, with OOM_CAP when this engine can grant it: an engine that runs in a
        container of its own may lack it (as on the machines examhall is tested on)."""
        with self._lock:
            if self._caps is None:
                self._caps = [*WORKER_CAPS] + ([OOM_CAP] if self._grants(OOM_CAP) else [])
            return self._caps

    def _grants(self, capability: str) -> bool:
        try:
            self.client.containers.run(
                self.settings.image,
                entrypoint=["true"],
                cap_drop=["ALL"],
                cap_add=[capability],
                network_mode="none",
                labels={LABEL_OWNER: self.owner, LABEL_PROBE: capability},
                log_config=LogConfig(type="none"),
                remove=True,
            )
            return True
        except docker.errors.APIError:
            # The engine refused the capability; remove what it left, if anything.
            for container in self.client.containers.list(
                all=True, filters={"label": f"{LABEL_PROBE}={capability}"}, ignore_removed=True
            ):
                if container.labels.get(LABEL_OWNER) == self.owner:
                    remove(container)
            return False

    def health(self) -> str:
        try:
            # On a new connection: an engine shutting down (stopping its containers before
            # it exits) still answers on those it has open, but takes no new one, which a
            # trial's sandbox needs. The pooled ones in use finish their requests first.
            self.client.api.close()
            self.client.ping()
        except Exception as exc:  # any failure is the answer, not a crash of the probe
            return f"unreachable: {type(exc).__name__}"
        return "ok"

    def nodes(self) -> list[NodeStatus]:
        """One node: this engine, with the trials running on it (any control plane's)."""
        try:
            name = self.engine_name() or "docker"
            running = self.client.api.containers(filters={"label": LABEL_TRIAL}, quiet=True)
        except Exception as exc:  # the engine's own failure is the answer
            raise SandboxError(f"The Docker engine could not be asked: {exc}") from exc
        return [NodeStatus(name=name, state="ready", trials=len(running))]

    def reap(self, policy: ReapPolicy) -> list[str]:
        labels = [LABEL_TRIAL]
        if self.settings.scope is not None:
            labels.append(f"{LABEL_SCOPE}={self.settings.scope}")
        listed_at = time.monotonic()
        containers = {
            container.id: container
            for container in self.client.containers.list(
                all=True, filters={"label": labels}, ignore_removed=True
            )
        }
        if self.pool is not None:
            self.pool.prune({str(cid) for cid in containers}, listed_at)
        found = [
            _Found(self._trial_of(c), c.labels.get(LABEL_OWNER, ""), str(cid))
            for cid, c in containers.items()
            # A slot of this plane's pool not yet taken is kept: it waits for a trial.
            if self.pool is None or not self.pool.holds(str(cid))
        ]
        chosen: Sequence[FoundSandbox] = policy(found)
        removed = []
        for sandbox in chosen:
            assert isinstance(sandbox, _Found)
            remove(containers[sandbox.container_id])
            removed.append(sandbox.trial_id)
        return removed

    def _trial_of(self, container: Any) -> str:
        """The trial a container runs: its label, or for a slot this plane's pool gave a
        trial, that trial (a label cannot change once the container is created)."""
        taken = self.pool.trial_of(str(container.id)) if self.pool is not None else None
        return taken or str(container.labels.get(LABEL_TRIAL, ""))


@dataclass(frozen=True)
class _Found(FoundSandbox):
    container_id: str = ""
