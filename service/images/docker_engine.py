"""`ImageEngine` (engine.py) on Docker's engine: the one place a Docker client meets the
building of environments and agent layers. The engine's exceptions become EngineError here,
so that nothing above this package names docker-py's."""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import docker
import docker.errors
import docker.models.containers
import docker.models.images
import requests.exceptions

from service.images.build_network import (
    BuildNetwork,
    ensure_build_network,
    proxy_faults,
    replace_proxy,
)
from service.images.capped import Caps, Ran, reap_capped, run_capped
from service.images.capped_build import BuildLimits, BuildLog, remove_layers, run_build
from service.images.debian_base import Progress
from service.images.debian_base import bootstrap_debian_base as bootstrap
from service.images.engine import EngineError, EngineTimeout, ImageFacts, Layer
from service.images.wheels import ImagePython
from service.images.wheels import image_python as probe_python

# The engine's names for machines (`docker version`'s Arch) in OCI's, which images carry.
_OCI_ARCH = {"x86_64": "amd64", "aarch64": "arm64", "armv7l": "arm"}
_GO_DIR, _GO_SYMLINK = 1 << 31, 1 << 27  # Go's os.FileMode bits, as the engine reports modes


@contextmanager
def _engine_errors() -> Iterator[None]:
    try:
        yield
    except docker.errors.DockerException as exc:
        explanation = getattr(exc, "explanation", None)
        raise EngineError(str(explanation or exc).strip() or type(exc).__name__) from exc


def _facts(image: docker.models.images.Image) -> ImageFacts:
    attrs = image.attrs
    return ImageFacts(
        id=str(image.id),
        tags=tuple(image.tags),
        labels=dict(image.labels or {}),
        config=dict(attrs.get("Config") or {}),
        os=str(attrs.get("Os") or "linux"),
        architecture=str(attrs.get("Architecture") or ""),
        created=str(attrs.get("Created") or ""),
        size=int(attrs.get("Size") or 0),
    )


class DockerImageEngine:
    def __init__(self, client: docker.DockerClient) -> None:
        self._client = client

    def image(self, ref: str) -> ImageFacts | None:
        with _engine_errors():
            try:
                return _facts(self._client.images.get(ref))
            except docker.errors.ImageNotFound:
                return None
            except docker.errors.APIError as exc:
                # An invalid reference ("invalid reference format", 400) names no image either.
                if exc.status_code == 400:
                    return None
                raise

    def images(self, repository: str) -> list[ImageFacts]:
        with _engine_errors():
            return [_facts(image) for image in self._client.images.list(name=repository)]

    def history(self, ref: str) -> list[Layer] | None:
        with _engine_errors():
            try:
                entries = self._client.images.get(ref).history()
            except docker.errors.NotFound:
                return None
        return [
            Layer(_layer_key(entry), int(entry.get("Size") or 0), tuple(entry.get("Tags") or ()))
            for entry in entries
        ]

    def remove_image(self, ref: str) -> bool:
        with _engine_errors():
            try:
                self._client.images.remove(ref)
            except docker.errors.NotFound:
                return False
        return True

    def architecture(self) -> str:
        with _engine_errors():
            arch = str(self._client.version().get("Arch", ""))
        return _OCI_ARCH.get(arch, arch)

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
        with _engine_errors():
            return run_build(
                self._client,
                tarball,
                tag=tag,
                labels=labels,
                buildargs=buildargs,
                limits=limits,
                timeout_s=timeout_s,
                progress=progress,
                log=log,
                cancel=cancel,
                keep_as=keep_as,
            )

    def discard_build(self, log: BuildLog) -> None:
        with _engine_errors():
            remove_layers(self._client, log)

    def build_network(self, image: str, hosts: Collection[str]) -> BuildNetwork:
        with _engine_errors():
            return ensure_build_network(self._client, image, hosts)

    def build_proxy_faults(self, since: float) -> list[str]:
        with _engine_errors():
            return proxy_faults(self._client, since)

    def replace_build_proxy(self) -> None:
        with _engine_errors():
            replace_proxy(self._client)

    def bootstrap_debian_base(self, suite: str, progress: Progress) -> str:
        with _engine_errors():
            return bootstrap(self._client, suite, progress=progress)

    def run_capped(
        self,
        image: str,
        argv: list[str],
        caps: Caps,
        *,
        labels: dict[str, str] | None = None,
        cancel: threading.Event | None = None,
    ) -> Ran:
        with _engine_errors():
            return run_capped(self._client, image, argv, caps, labels=labels, cancel=cancel)

    def image_python(
        self,
        image: str,
        python: str = "python3",
        *,
        caps: Caps,
        cancel: threading.Event | None = None,
    ) -> ImagePython:
        with _engine_errors():
            return probe_python(self._client, image, python, caps=caps, cancel=cancel)

    @contextmanager
    def scratch(
        self,
        image: str,
        argv: list[str],
        *,
        caps: Caps,
        name: str,
        labels: dict[str, str],
    ) -> Iterator[_DockerScratch]:
        with _engine_errors():
            container = self._client.containers.create(
                image,
                entrypoint=argv[:1],
                command=argv[1:],
                user="0:0",
                network_disabled=True,
                cap_drop=["ALL"],
                security_opt=["no-new-privileges"],
                mem_limit=caps.memory,
                cpu_shares=caps.cpu_shares,
                pids_limit=caps.pids,
                labels=labels,
                name=name,
            )
        try:
            yield _DockerScratch(self._client, container)
        finally:
            with _engine_errors():
                container.remove(force=True)

    def reap_capped(self, gone: Callable[[str], bool]) -> list[str]:
        with _engine_errors():
            return reap_capped(self._client, gone)


class _DockerScratch:
    def __init__(
        self, client: docker.DockerClient, container: docker.models.containers.Container
    ) -> None:
        self._client, self._container = client, container

    def put_archive(self, path: str, tarball: bytes) -> None:
        with _engine_errors():
            self._container.put_archive(path, tarball)

    def run(self, timeout_s: float) -> tuple[int, str]:
        with _engine_errors():
            self._container.start()
            try:
                code = int(self._container.wait(timeout=timeout_s)["StatusCode"])
            except requests.exceptions.RequestException as exc:
                raise EngineTimeout(f"it ran past {timeout_s:g} s") from exc
            return code, bytes(self._container.logs()).decode(errors="replace")

    def changes(self) -> list[tuple[str, int]]:
        with _engine_errors():
            diff: list[dict[str, Any]] = self._container.diff() or []
        return [(str(change.get("Path")), int(change.get("Kind") or 0)) for change in diff]

    def path_mode(self, path: str) -> tuple[int | None, str]:
        api: Any = self._client.api
        # docker-py has no call for the archive's HEAD (a stat that reads no file).
        url = f"{api.base_url}/v{api.api_version}/containers/{self._container.id}/archive"
        try:
            response = api.head(url, params={"path": path})
        except requests.exceptions.RequestException as exc:
            raise EngineError(str(exc)) from exc
        header = response.headers.get("X-Docker-Container-Path-Stat")
        if response.status_code != 200 or not header:
            return None, f"HTTP {response.status_code}"
        mode = int(json.loads(base64.b64decode(header))["mode"])
        # Go's type bits become Python's (stat.S_IFDIR, S_IFLNK), so callers read plain modes.
        kind = 0o040000 if mode & _GO_DIR else 0o120000 if mode & _GO_SYMLINK else 0o100000
        return kind | (mode & 0o7777), ""

    def commit(self, ref: str, changes: Sequence[str]) -> str:
        repository, _, tag = ref.rpartition(":")
        with _engine_errors():
            image = self._container.commit(repository=repository, tag=tag, changes=list(changes))
        return str(image.id)


def _layer_key(entry: dict[str, Any]) -> str:
    entry_id = str(entry.get("Id") or "")
    if entry_id and entry_id != "<missing>":
        return entry_id
    # A layer of a pulled image has no local id: what made it and when names it.
    return f"{entry.get('Created')}|{entry.get('CreatedBy')}|{entry.get('Size')}"
