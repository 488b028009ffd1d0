"""The Swarm backend: trials spread over a Docker Swarm's nodes (see backend.py)."""

from __future__ import annotations

from collections.abc import Callable

import docker
import docker.errors
from docker.utils import kwargs_from_env

from service.backends.base import SandboxError
from service.backends.swarm.backend import SwarmBackend, SwarmSandbox, SwarmSettings
from service.backends.swarm.images import ImagePublisher
from service.settings import get_settings

__all__ = ["SwarmBackend", "SwarmSandbox", "SwarmSettings", "connect", "create"]


def connect(url: str | None) -> docker.DockerClient:
    """A client of the engine at `url` (TLS from the environment, as the docker CLI), or of
    the local engine."""
    if not url:
        return docker.from_env()
    return docker.DockerClient(base_url=url, tls=kwargs_from_env().get("tls", False))


def create(
    progress: Callable[[str], None],
    *,
    local: docker.DockerClient | None = None,
    manager: docker.DockerClient | None = None,
    scope: str | None = None,
) -> SwarmBackend:
    """The backend on the swarm EXAMHALL_SWARM_MANAGER names, with the sandbox image built
    on this control plane's engine and pushed to the box's registry first."""
    from service.images.sandbox_image import ensure_sandbox_image

    settings = get_settings()
    if not settings.swarm_registry:
        raise SandboxError(
            "The swarm backend needs the box's image registry: set EXAMHALL_SWARM_REGISTRY "
            "to its host:port (see docs/guides/several-boxes.md)."
        )
    try:
        local = local or docker.from_env()
        local.ping()
        manager = manager or connect(settings.swarm_manager)
        swarm = manager.info().get("Swarm", {})
    except docker.errors.DockerException as exc:
        raise SandboxError(
            f"Cannot reach the Docker engine or the swarm manager ({exc}); check DOCKER_HOST "
            "and EXAMHALL_SWARM_MANAGER."
        ) from None
    if not swarm.get("ControlAvailable"):
        raise SandboxError(
            f"The engine at {settings.swarm_manager or 'DOCKER_HOST'} is not a swarm manager "
            f"(its swarm state: {swarm.get('LocalNodeState') or 'inactive'}); run `docker "
            "swarm init` there, or point EXAMHALL_SWARM_MANAGER at a manager."
        )
    image = ensure_sandbox_image(local, progress=progress)
    publisher = ImagePublisher(
        local, settings.swarm_registry, settings.swarm_registry_pull or settings.swarm_registry
    )
    progress(f"Pushing the sandbox image to the box's registry {settings.swarm_registry}.")
    pulled = publisher.publish(image)
    config = SwarmSettings(
        image=pulled,
        egress_network=settings.swarm_egress_network,
        scope=scope,
        local_image=image,
    )
    return SwarmBackend(config, manager, publisher, pulled.rpartition("@")[2] or None)
