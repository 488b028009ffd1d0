"""The Docker backend: one fresh, hardened container per trial on the local engine.

The worker's channel is the container's attached stdin and stdout; the container is removed
in every case. Which containers are examhall's, and whose, the labels say.
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
)
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


def remove(container: Any) -> None:
    """Remove a container; never raises. One the engine refuses or does not answer about in
    time is logged and left to the reaper, which removes the labelled containers no running
    trial owns: a slow engine must not turn a trial already settled into an error."""
    for attempt in range(3):
        try:
            # v: an anonymous volume (none should exist) goes with its container.
            container.remove(force=True, v=True)
            return
        except docker.errors.NotFound:
            return
        except docker.errors.APIError as exc:  # e.g. a removal already under way: try again
            error: Exception = exc
            if attempt < 2:
                time.sleep(0.5)
        except Exception as exc:
            # A timeout already waited out the client's whole read timeout (60 s by
            # default): another attempt now would keep the trial waiting as long again.
            error = exc
            break
    log.warning(
        "container %s was not removed (%s: %s); left to the reaper",
        container.id,
        type(error).__name__,
        error,
    )


class DockerBackend:
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

    def start(self, launch: LaunchSpec) -> DockerSandbox:
        container = channel = None
        t0 = time.monotonic()
        try:
            container = self.client.containers.create(**self.container_config(launch))
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
            caps=self.worker_caps(),
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
        containers = {
            container.id: container
            for container in self.client.containers.list(
                all=True, filters={"label": labels}, ignore_removed=True
            )
        }
        found = [
            _Found(c.labels.get(LABEL_TRIAL, ""), c.labels.get(LABEL_OWNER, ""), str(cid))
            for cid, c in containers.items()
        ]
        chosen: Sequence[FoundSandbox] = policy(found)
        removed = []
        for sandbox in chosen:
            assert isinstance(sandbox, _Found)
            remove(containers[sandbox.container_id])
            removed.append(sandbox.trial_id)
        return removed


@dataclass(frozen=True)
class _Found(FoundSandbox):
    container_id: str = ""
