"""The Docker backend: hardened containers on the local engine (see backend.py)."""

from __future__ import annotations

from collections.abc import Callable

import docker

from service.backends.base import SandboxError
from service.backends.docker.backend import DockerBackend, DockerSandbox, DockerSettings
from service.backends.docker.hardening import (
    LABEL_JOB,
    LABEL_OWNER,
    LABEL_SCOPE,
    LABEL_TRIAL,
    WORKER_CAPS,
)

__all__ = [
    "LABEL_JOB",
    "LABEL_OWNER",
    "LABEL_SCOPE",
    "LABEL_TRIAL",
    "WORKER_CAPS",
    "DockerBackend",
    "DockerSandbox",
    "DockerSettings",
    "create",
    "image_digest",
]


def image_digest(client: docker.DockerClient, ref: str) -> str | None:
    try:
        return str(client.images.get(ref).id)
    except docker.errors.DockerException:
        return None


def create(
    progress: Callable[[str], None], client: docker.DockerClient | None = None
) -> DockerBackend:
    """The backend on the local engine, with the sandbox image built (or found) first."""
    from service.images.sandbox_image import ensure_sandbox_image

    try:
        client = client or docker.from_env()
        client.ping()
    except docker.errors.DockerException as exc:
        raise SandboxError(
            f"Cannot reach the Docker engine ({exc}); start it or set DOCKER_HOST."
        ) from None
    image = ensure_sandbox_image(client, progress=progress)
    return DockerBackend(DockerSettings(image=image), client, image_digest(client, image))
