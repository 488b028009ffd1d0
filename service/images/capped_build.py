"""One image build on the engine's classic builder, under a deadline and resource caps, with
its whole log kept.

The deadline, a cancel and the disk cap are enforced by shutting the build's connection down:
the engine then cancels the build, and `forcerm` makes it remove the step's container. The
build's RUN steps share one pids and memory cap through a pen (build_pen.py). The disk cap is
watched, not enforced by the kernel (the engine's storage drivers here take no size for a
build): the watcher adds up what the build's layers and its running step have written twice a
second, so a step may write what it can in half a second past the cap before it is stopped.
"""

from __future__ import annotations

import contextlib
import json
import re
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import docker
import docker.errors

from service.images.build_pen import build_pen
from service.images.debian_base import Progress

_STEP = re.compile(r"^Step \d+/\d+ : ")
_FROM_STEP = re.compile(r"^Step \d+/\d+ : FROM ", re.IGNORECASE)
_LAYER = re.compile(r"^ ---> ([0-9a-f]{12,64})$")
_CONTAINER = re.compile(r"^ ---> Running in ([0-9a-f]{12,64})$")
TAIL_LINES = 20
_WATCH_S = 0.2
_DISK_EVERY_S = 0.5
_HELD_S = 10.0  # how long a stopped build's last step container may outlive it


@dataclass(frozen=True)
class BuildLimits:
    memory: int  # bytes, of each step and, in a pen, of all of them together
    cpu_shares: int
    network: str | None  # None: Docker's default network
    pids: int  # processes of all the steps together (in a pen)
    disk: int  # bytes the build's layers may add to its bases
    pen_image: str  # a trusted image that holds the pen (build_pen.py)
    owner: str | None = None  # the control plane building, for the reaper


@dataclass
class BuildLog:
    lines: list[str] = field(default_factory=list)
    step: str | None = None  # the last "Step N/M : INSTRUCTION" the builder printed
    layers: list[str] = field(default_factory=list)  # each step's image, as printed
    bases: set[str] = field(default_factory=set)  # of those, the images a FROM step named
    containers: list[str] = field(default_factory=list)  # each step's container, as printed
    running: str | None = None  # the step container that has not yet become a layer

    def add(self, line: str) -> None:
        self.lines.append(line)
        if _STEP.match(line):
            self.step = line
        elif layer := _LAYER.match(line):
            self.layers.append(layer[1])
            if self.step is not None and _FROM_STEP.match(self.step):
                self.bases.add(layer[1])
            self.running = None
        elif container := _CONTAINER.match(line):
            self.containers.append(container[1])
            self.running = container[1]

    def tail(self) -> str:
        return "\n".join(f"    {line}" for line in self.lines[-TAIL_LINES:]) or "    (no output)"

    def text(self) -> str:
        return "\n".join(self.lines)


class BuildError(Exception):
    """A build failed (or ran out of time or disk); `log` has what it printed."""

    def __init__(
        self,
        message: str,
        log: BuildLog,
        *,
        timed_out: bool = False,
        cancelled: bool = False,
        over_disk: bool = False,
        step_failed: bool = False,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.log = log
        self.timed_out = timed_out
        self.cancelled = cancelled
        self.over_disk = over_disk
        # A step's own command failed (the engine said so), not the build stopped by us.
        self.step_failed = step_failed


class _Stream:
    """The build's HTTP response, shut down from the watching thread with the reason."""

    def __init__(self, api: docker.APIClient) -> None:
        self.api = api
        self.response: Any = None
        self.stopped: str | None = None  # "deadline", "cancel" or "disk"
        self._lock = threading.Lock()

    def capture(self, response: Any) -> Iterator[Any]:
        with self._lock:
            self.response = response
            stopped = self.stopped
        if stopped:
            self._shut()
        helper = type(self.api)._stream_helper  # type: ignore[attr-defined]
        return iter(helper(self.api, response, decode=True))

    def stop(self, reason: str) -> None:
        with self._lock:
            if self.stopped:
                return
            self.stopped = reason
            if self.response is None:
                return
        self._shut()

    def _shut(self) -> None:
        try:
            raw = self.api._get_raw_response_socket(self.response)  # type: ignore[attr-defined]
            sock = getattr(raw, "_sock", raw)
            sock.shutdown(socket.SHUT_RDWR)
        except (OSError, AttributeError, docker.errors.DockerException):
            # Already closed, or a transport without a socket: closing is all there is.
            self.response.close()


class _Written:
    """What a build has written so far: its layers above their bases, and its running step's
    own layer. Sizes of images are cumulative, so a stage's layers telescope."""

    def __init__(self, client: docker.DockerClient, log: BuildLog) -> None:
        self.client = client
        self.log = log
        self._sizes: dict[str, int] = {}

    def __call__(self) -> int:
        total, previous = 0, 0
        for layer in list(self.log.layers):
            size = self._size(layer)
            if layer not in self.log.bases:
                total += max(size - previous, 0)
            previous = size
        if (running := self.log.running) is not None:
            total += self._running(running)
        return total

    def _size(self, layer: str) -> int:
        if layer not in self._sizes:
            try:
                self._sizes[layer] = int(self.client.images.get(layer).attrs.get("Size") or 0)
            except docker.errors.DockerException:
                return 0  # removed meanwhile: the next look tells
        return self._sizes[layer]

    def _running(self, container: str) -> int:
        api: Any = self.client.api  # docker-py's inspect_container() cannot ask for sizes
        try:
            url = api._url("/containers/{0}/json", container)
            found = api._result(api._get(url, params={"size": 1}), True)
        except docker.errors.DockerException:
            return 0  # committed and removed meanwhile: its layer is counted next time
        return int(found.get("SizeRw") or 0)


def run_build(
    client: docker.DockerClient,
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
    """Build the context `tarball` (never pulling) and return the new image's id. Past the
    deadline or the disk cap, or on `cancel`, the build is abandoned and leaves no image of
    its own behind (`remove_layers`); so does a failed step, unless `keep_as` is given: the
    steps before it are then kept, the last one tagged `keep_as`, and the next build of the
    same steps starts after them (the engine's cache)."""
    with build_pen(
        client,
        limits.pen_image,
        pids=limits.pids,
        memory=limits.memory,
        cpu_shares=limits.cpu_shares,
        owner=limits.owner,
    ) as pen:
        if pen.parent is None:
            log.add(f"(the steps of this build have no shared pids cap: {pen.why_none})")
        params: dict[str, Any] = {
            "t": tag,
            "rm": True,
            "forcerm": True,
            "pull": False,
            "labels": json.dumps(labels),
            "buildargs": json.dumps(buildargs or {}),
            "networkmode": limits.network,
            "memory": limits.memory,
            "memswap": limits.memory,
            "cpushares": limits.cpu_shares,
            "cgroupparent": pen.parent,
        }
        return _build(client, tarball, params, limits, timeout_s, progress, log, cancel, keep_as)


def _build(
    client: docker.DockerClient,
    tarball: bytes,
    params: dict[str, Any],
    limits: BuildLimits,
    timeout_s: float,
    progress: Progress,
    log: BuildLog,
    cancel: threading.Event | None,
    keep_as: str | None = None,
) -> str:
    api: Any = client.api
    stream = _Stream(api)
    written = _Written(client, log)
    done = threading.Event()
    started = time.monotonic()
    started_wall = time.time()

    def watch() -> None:
        deadline = started + max(timeout_s, 0.0)
        next_disk = started
        while not done.wait(min(_WATCH_S, max(deadline - time.monotonic(), 0.0))):
            now = time.monotonic()
            if cancel is not None and cancel.is_set():
                stream.stop("cancel")
            elif now >= deadline:
                stream.stop("deadline")
            elif now >= next_disk:
                next_disk = now + _DISK_EVERY_S
                if written() > limits.disk:
                    stream.stop("disk")
            if stream.stopped:
                return
        if time.monotonic() >= deadline and not done.is_set():
            stream.stop("deadline")

    watcher = threading.Thread(target=watch, name="examhall-build-watch", daemon=True)
    image_id: str | None = None
    watcher.start()
    try:
        # docker-py's build() takes no parent cgroup: the request is its, made here.
        response = api._post(
            api._url("/build"),
            data=tarball,
            params={key: value for key, value in params.items() if value is not None},
            headers={"Content-Type": "application/tar"},
            stream=True,
            timeout=None,
        )
        for chunk in stream.capture(response):
            for line in str(chunk.get("stream", "")).splitlines():
                if line.strip():
                    log.add(line.rstrip())
                    progress(line.rstrip())
            aux = chunk.get("aux")
            if isinstance(aux, dict) and aux.get("ID"):
                image_id = str(aux["ID"])
            if "error" in chunk or "errorDetail" in chunk:
                detail = chunk.get("errorDetail") or {}
                message = str(chunk.get("error") or detail.get("message") or chunk).strip()
                log.add(message)
                raise BuildError(message, log, step_failed=True)
        if stream.stopped:
            raise _abandoned(stream, timeout_s, limits, log)
        if image_id is None:
            raise BuildError(
                f"the build ended after {time.monotonic() - started:.0f} s without an image", log
            )
    except docker.errors.DockerException as exc:
        done.set()
        remove_layers(client, log)
        if stream.stopped:
            raise _abandoned(stream, timeout_s, limits, log) from exc
        raise BuildError(str(exc), log) from exc
    except BaseException as exc:
        done.set()
        kept = (
            keep_as is not None
            and isinstance(exc, BuildError)
            and exc.step_failed
            and not stream.stopped
            and keep_layers(client, log, keep_as, started_wall)
        )
        if not kept:
            remove_layers(client, log)
        # The shut-down connection surfaces as whatever urllib3 makes of it; an error the
        # engine printed as the connection went is the stop's, not the step's.
        if stream.stopped:
            raise _abandoned(stream, timeout_s, limits, log) from exc
        raise
    finally:
        done.set()
    return image_id


def _abandoned(stream: _Stream, timeout_s: float, limits: BuildLimits, log: BuildLog) -> BuildError:
    if stream.stopped == "cancel":
        message = "the build was cancelled"
        log.add(message)
        return BuildError(message, log, cancelled=True)
    if stream.stopped == "disk":
        message = (
            f"the build wrote more than its {limits.disk / 1024**2:.0f} MiB of disk and was stopped"
        )
        log.add(message)
        return BuildError(message, log, over_disk=True)
    message = f"the build ran out of its {timeout_s:.0f} s and was abandoned"
    log.add(message)
    return BuildError(message, log, timed_out=True)


def remove_layers(client: docker.DockerClient, log: BuildLog) -> None:
    """Remove what a failed build made: its step containers (an abandoned build's last one
    may still run, holding its parent layer), then each step's image, newest first, as long
    as it has no tag and no child (the base a build started from is tagged; a layer that
    another image grew from is not the build's alone)."""
    for container in log.containers:
        with contextlib.suppress(docker.errors.NotFound):
            client.api.remove_container(container, force=True)
    for layer in reversed(log.layers):
        if layer not in log.bases:
            _remove_layer(client, layer)


def _made_since(created: str, since: float) -> bool:
    try:
        when = datetime.fromisoformat(created[:26].rstrip("Z") + "+00:00").timestamp()
    except ValueError:
        return False
    return when >= since - 1.0


def keep_layers(client: docker.DockerClient, log: BuildLog, tag: str, since: float) -> bool:
    """Tag the last step image the build made `tag`, so that it and the steps under it stay
    (and the engine's cache resumes after them); False when it made none past its base, or
    the engine would not tag it."""
    made = [layer for layer in log.layers if layer not in log.bases]
    if not made:
        return False
    repository, _, name = tag.rpartition(":")
    try:
        image = client.images.get(made[-1])
        # The ids come from the build's output, which a step's own output can imitate: the
        # image tagged must be one this build made (no older than it) on its own base.
        ancestors = {str(h.get("Id", "")).removeprefix("sha256:") for h in image.history()}
        if not _made_since(image.attrs.get("Created", ""), since) or not any(
            any(a.startswith(base) for a in ancestors) for base in log.bases
        ):
            return False
        image.tag(repository, name)
    except docker.errors.DockerException:
        return False
    for container in log.containers:
        with contextlib.suppress(docker.errors.NotFound):
            client.api.remove_container(container, force=True)
    log.add(f"(the steps before the one that failed are kept as {tag}: the next build of this "
            "environment starts after them)")  # fmt: skip
    return True


def _remove_layer(client: docker.DockerClient, layer: str) -> None:
    # A build stopped between steps may have started its next step's container before
    # printing it: the engine removes that container as it notices the stop, so a layer held
    # by a container is tried again for a while. One held by a child image is not ours.
    deadline = time.monotonic() + _HELD_S
    while True:
        try:
            if client.images.get(layer).tags:
                return
            client.images.remove(layer, noprune=True)
            return
        except docker.errors.NotFound:
            return
        except docker.errors.APIError as exc:
            held = "container" in str(exc.explanation or "")
            if not held or time.monotonic() > deadline:
                return
            time.sleep(0.2)
