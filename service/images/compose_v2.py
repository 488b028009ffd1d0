"""An image holding Docker's CLI and Compose v2, for running `docker compose` against the
host's engine through its socket where the host has only Compose v1 (or none).

Compose v2 first ships as Debian's `docker-compose` package in trixie, so the image is
docker/compose-v2.Dockerfile on a Debian trixie base, bootstrapped the way the sandbox's is
when no registry is reachable (service/images/debian_base.py). It is built once per recipe
and base and then reused: tests/compose/ runs the box with it, and Harbor's benchmark runner
(bench/harbor/runner.Dockerfile) is built on it.
"""

from __future__ import annotations

import docker

from service.images.debian_base import (
    DEBIAN_BASE_REPO,
    Progress,
    bootstrap_debian_base,
    pull_if_missing,
)
from service.images.sandbox_image import (
    HASH_LABEL,
    BuildContext,
    build_image,
    fields_digest,
    is_current,
    repo_root,
)

COMPOSE_V2_REPO = "examhall/compose-v2"
COMPOSE_V2_SUITE = "trixie"
DOCKERFILE = "docker/compose-v2.Dockerfile"


def debian_image(client: docker.DockerClient, suite: str, progress: Progress) -> str:
    """`examhall/debian-base:<suite>`, bootstrapped with debootstrap when it cannot be had."""
    base = f"{DEBIAN_BASE_REPO}:{suite}"
    if pull_if_missing(client, base, progress) is not None:
        bootstrap_debian_base(client, suite, progress=progress)
    return base


def compose_v2_image(client: docker.DockerClient, progress: Progress) -> str:
    """The image's reference, built unless an image of the same recipe and base is there."""
    base = debian_image(client, COMPOSE_V2_SUITE, progress)
    dockerfile = (repo_root() / DOCKERFILE).read_bytes()
    digest = fields_digest([("Dockerfile", dockerfile), ("base", base.encode())])
    ref = f"{COMPOSE_V2_REPO}:{digest[:12]}"
    if is_current(client, ref, digest):
        return ref
    progress(f"Building {ref} (Docker CLI and Compose v2) on {base}...")
    build_image(
        client,
        BuildContext(dockerfile, ()),
        ref,
        base,
        labels={HASH_LABEL: digest},
        nocache=False,
        progress=progress,
        advice=f"Fix the cause above (the recipe is {DOCKERFILE}; apt in the build must "
        "reach a Debian mirror), then run this again.",
    )
    return ref
