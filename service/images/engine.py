"""The engine images are built on, as everything outside this package sees it.

Task environments (service/environments/) and the scheduler build, probe, install into and
evict images through `ImageEngine` alone: what they may ask of an engine is this list, and
no engine client leaves service/images. Docker's engine is `DockerImageEngine`
(docker_engine.py), which the Docker and Swarm backends hand out
(service/backends/base.py, `BuildsImages`); another engine that can build OCI images is one
more class with these methods.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, Protocol

from service.images.build_network import BuildNetwork
from service.images.capped import Caps, Ran
from service.images.capped_build import BuildLimits, BuildLog
from service.images.debian_base import Progress
from service.images.wheels import ImagePython


@dataclass(frozen=True)
class ImageFacts:
    """What a built image is: its id and names, and what it says about itself."""

    id: str
    tags: tuple[str, ...] = ()
    labels: Mapping[str, str] = field(default_factory=dict)
    # The image's own configuration (Entrypoint, Cmd, User, Env, Volumes, WorkingDir, ...),
    # in the engine's (OCI's) field names.
    config: Mapping[str, Any] = field(default_factory=dict)
    os: str = "linux"
    architecture: str = ""
    created: str = ""  # RFC 3339
    size: int = 0


@dataclass(frozen=True)
class Layer:
    """One entry of an image's history, its own layer or one of an image below it."""

    key: str  # the layer's id, or what made it and when where the engine keeps no id
    size: int
    tags: tuple[str, ...]  # the images this entry is the top of


class EngineError(RuntimeError):
    """The engine could not do what it was asked; the message is the engine's own."""


class EngineTimeout(EngineError):
    """A wait on the engine ran past its deadline."""


class ScratchContainer(Protocol):
    """A container made to change an image once and be committed (or thrown away): created
    stopped, removed however it ends."""

    def put_archive(self, path: str, tarball: bytes) -> None: ...

    def run(self, timeout_s: float) -> tuple[int, str]:
        """Start it and wait for it to exit: its status and what it printed; EngineTimeout
        past `timeout_s`."""

    def changes(self) -> list[tuple[str, int]]:
        """What it changed in its image: (path, kind) with kind 0 changed, 1 added,
        2 deleted."""

    def path_mode(self, path: str) -> tuple[int | None, str]:
        """The mode bits of `path` in it without reading the file (None and why if it
        cannot be read)."""

    def commit(self, ref: str, changes: Sequence[str]) -> str:
        """The container as image `ref` with Dockerfile `changes` applied; its id."""


class ImageEngine(Protocol):
    def image(self, ref: str) -> ImageFacts | None:
        """The image `ref` names, or None if there is none (or the name is malformed)."""

    def images(self, repository: str) -> list[ImageFacts]:
        """The images tagged in `repository`."""

    def history(self, ref: str) -> list[Layer] | None:
        """The image's layers, top first; None if it is gone."""

    def remove_image(self, ref: str) -> bool:
        """Untag `ref` and remove what only it held; False if it was gone already."""

    def architecture(self) -> str:
        """The engine's architecture in OCI's names (amd64, arm64, ...)."""

    def build(
        self,
        tarball: bytes,
        *,
        tag: str | None,
        labels: dict[str, str],
        buildargs: dict[str, str] | None = None,
        limits: BuildLimits,
        timeout_s: float,
        progress: Progress,
        log: BuildLog,
        cancel: threading.Event | None = None,
        keep_as: str | None = None,
    ) -> str:
        """Build the context `tarball` under `limits` without pulling; the new image's id.
        BuildError if it fails, leaving none of its layers behind; but for a step whose own
        command failed, with `keep_as`, the steps before it stay, the last tagged `keep_as`,
        so that the next build of them resumes there."""

    def discard_build(self, log: BuildLog) -> None:
        """Remove what the builds that wrote `log` left (their images and containers)."""

    def build_network(self, image: str, hosts: Collection[str]) -> BuildNetwork:
        """The network for builds' RUN steps, with a proxy of `image` reaching `hosts`."""

    def build_proxy_faults(self, since: float) -> list[str]:
        """What the build proxy logged since `since` (Unix time) that is the box's fault."""

    def replace_build_proxy(self) -> None:
        """Remove the build proxy, so that the next build makes it anew."""

    def bootstrap_debian_base(self, suite: str, progress: Progress) -> str:
        """Build the Debian base image of `suite` from Debian's packages; its reference."""

    def run_capped(
        self,
        image: str,
        argv: list[str],
        caps: Caps,
        *,
        labels: dict[str, str] | None = None,
        cancel: threading.Event | None = None,
    ) -> Ran:
        """Run `argv` in `image` as a build step would be run, under `caps`."""

    def image_python(
        self,
        image: str,
        python: str = "python3",
        *,
        caps: Caps,
        cancel: threading.Event | None = None,
    ) -> ImagePython:
        """The version and glibc of `image`'s `python`, found by one capped run of it."""

    def scratch(
        self,
        image: str,
        argv: list[str],
        *,
        caps: Caps,
        name: str,
        labels: dict[str, str],
    ) -> AbstractContextManager[ScratchContainer]:
        """A container of `image` running `argv` as root with no network and no capability,
        under `caps` (its timeout is the caller's to apply), removed on leaving."""

    def reap_capped(self, gone: Callable[[str], bool]) -> list[str]:
        """Remove the build containers whose control plane `gone` says is gone; their ids."""
