"""Getting the images trials run in onto every node, through the box's own registry.

Images are built on the control plane's engine (the sandbox image, task environments, agent
layers), where no other node can see them. Each is pushed once to the box's registry under
its content hash and named to the nodes by digest, so a node that joins later, or one that
never ran a trial of that image, pulls exactly what was built. The registry is reached
under two names: as the control plane pushes to it and as the nodes pull from it (one
host:port on a real box, where both are 127.0.0.1:5000 through Swarm's routing mesh).
"""

from __future__ import annotations

import contextlib
import json
import threading
from typing import Any

import docker
import docker.errors

from service.backends.base import SandboxError

REPOSITORY = "examhall/trial"


class ImagePublisher:
    def __init__(self, local: docker.DockerClient, push_to: str, pull_from: str) -> None:
        self.local = local
        self.push_to = push_to
        self.pull_from = pull_from
        # Local image id -> the reference nodes pull; one push per image per process.
        self._published: dict[str, str] = {}
        self._locks: dict[str, threading.Lock] = {}
        self._lock = threading.Lock()

    def publish(self, image: str) -> str:
        """The reference the nodes pull `image` (a local tag or id) by; pushed if need be."""
        try:
            image_id = str(self.local.images.get(image).id)
        except docker.errors.DockerException as exc:
            raise SandboxError(
                f"Image {image} is not on this control plane's engine: {exc}"
            ) from None
        with self._lock:
            if image_id in self._published:
                return self._published[image_id]
            lock = self._locks.setdefault(image_id, threading.Lock())
        with lock:
            if image_id not in self._published:
                self._published[image_id] = self._push(image_id)
            return self._published[image_id]

    def _push(self, image_id: str) -> str:
        tag = image_id.removeprefix("sha256:")
        repository = f"{self.push_to}/{REPOSITORY}"
        try:
            self.local.api.tag(image_id, repository, tag)
            digest = _pushed_digest(self.local.api.push(repository, tag, stream=True, decode=True))
        except docker.errors.DockerException as exc:
            raise SandboxError(
                f"Could not push image {tag[:12]} to the box's registry {self.push_to}: {exc}. "
                "Check EXAMHALL_SWARM_REGISTRY and that the registry runs."
            ) from exc
        finally:
            # The pushed tag was only the push's name: the image keeps its own tags.
            with contextlib.suppress(docker.errors.DockerException):
                self.local.api.remove_image(f"{repository}:{tag}", noprune=True)
        return f"{self.pull_from}/{REPOSITORY}@{digest}"


def _pushed_digest(progress: Any) -> str:
    """The manifest digest a push reports, or SandboxError with the registry's complaint."""
    digest, line = None, None
    for line in progress:
        if "error" in line:
            raise SandboxError(f"The registry refused the push: {line['error']}")
        aux = line.get("aux") or {}
        digest = aux.get("Digest") or digest
    if not digest:
        raise SandboxError(f"The push reported no digest: {json.dumps(line)[:200]}")
    return str(digest)
