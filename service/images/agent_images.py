"""Sandbox image variants with a third-party agent CLI installed, for external-agent trials.

The agent comes from PyPI as wheels downloaded on the host for the image's Python, so the
image build needs no pip and no network inside it (the Debian-bootstrapped base has no pip,
and containers may reach the index only through a proxy they do not trust).
"""

from __future__ import annotations

import hashlib
import io
import tarfile
import tempfile
from pathlib import Path

import docker
import docker.errors

from service.images.debian_base import Progress
from service.images.sandbox_image import (
    HASH_LABEL,
    BuildFailed,
    ImageBuildError,
    repo_root,
    stream_build,
)
from service.images.wheels import download_wheels, python_version


def recipe_dir(name: str) -> Path:
    """Where the catalogue agent `name`'s recipe (a Dockerfile and the files it copies)
    lives."""
    return repo_root() / "docker" / "agents" / name


def ensure_agent_image(
    client: docker.DockerClient,
    sandbox: str,
    name: str,
    requirement: str,
    *,
    progress: Progress,
) -> str:
    """The variant of `sandbox` with the catalogue agent `name` (pip `requirement`, pinned;
    service/domain/agents.py lists them) installed, built when missing."""
    recipe = recipe_dir(name)
    if not recipe.is_dir():
        raise ImageBuildError(f"No recipe for agent {name!r} in {recipe.parent}.")
    files = sorted(p for p in recipe.iterdir() if p.is_file())
    digest = hashlib.sha256(f"{sandbox}\n{requirement}\n".encode())
    for path in files:
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    ref = f"examhall/agent-{name}:{digest.hexdigest()[:12]}"
    try:
        if client.images.get(ref).labels.get(HASH_LABEL) == digest.hexdigest():
            progress(f"Agent image {ref} is up to date.")
            return ref
    except docker.errors.ImageNotFound:
        pass
    with tempfile.TemporaryDirectory(prefix="examhall-agent-") as scratch:
        wheels = Path(scratch) / "wheels"
        download_wheels([requirement], python_version(client, sandbox), wheels, progress)
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w") as tar:
            for path in files:
                tar.add(path, arcname=path.name)
            tar.add(wheels, arcname="wheels")
        progress(f"Building {ref} on {sandbox}...")
        try:
            stream_build(
                client,
                buffer.getvalue(),
                ref=ref,
                buildargs={"SANDBOX": sandbox},
                labels={HASH_LABEL: digest.hexdigest()},
                nocache=False,
                progress=progress,
            )
        except BuildFailed as exc:
            raise ImageBuildError(f"Building {ref} failed: {exc}") from exc
    return ref
