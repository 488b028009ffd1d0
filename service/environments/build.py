"""One image build on the engine's classic builder, under a deadline and resource caps, with
its whole log kept.

The deadline is enforced by shutting the build's connection down: the engine then cancels the
build, and `forcerm` makes it remove the step's container. docker-py has no cancel of its own,
so the response is taken from its stream helper (on a copy of the client, so that other
threads' calls are untouched).
"""

from __future__ import annotations

import contextlib
import io
import re
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import docker
import docker.errors

from service.backends.docker.debian_base import Progress

_STEP = re.compile(r"^Step \d+/\d+ : ")
_LAYER = re.compile(r"^ ---> ([0-9a-f]{12,64})$")
_CONTAINER = re.compile(r"^ ---> Running in ([0-9a-f]{12,64})$")
TAIL_LINES = 20


@dataclass(frozen=True)
class BuildLimits:
    memory: int
    cpu_shares: int
    network: str | None  # None: Docker's default network


@dataclass
class BuildLog:
    lines: list[str] = field(default_factory=list)
    step: str | None = None  # the last "Step N/M : INSTRUCTION" the builder printed
    layers: list[str] = field(default_factory=list)  # each step's image, as printed
    containers: list[str] = field(default_factory=list)  # each step's container, as printed

    def add(self, line: str) -> None:
        self.lines.append(line)
        if _STEP.match(line):
            self.step = line
        elif layer := _LAYER.match(line):
            self.layers.append(layer[1])
        elif container := _CONTAINER.match(line):
            self.containers.append(container[1])

    def tail(self) -> str:
        return "\n".join(f"    {line}" for line in self.lines[-TAIL_LINES:]) or "    (no output)"

    def text(self) -> str:
        return "\n".join(self.lines)


class BuildError(Exception):
    """A build failed (or ran out of time); `log` has what it printed."""

    def __init__(
        self, message: str, log: BuildLog, *, timed_out: bool = False, cancelled: bool = False
    ) -> None:
        super().__init__(message)
        self.message = message
        self.log = log
        self.timed_out = timed_out
        self.cancelled = cancelled


class _Stream:
    """The build's HTTP response, shut down from a watching thread at the deadline or on a
    cancel."""

    def __init__(self, api: docker.APIClient) -> None:
        self.api = api
        self.response: Any = None
        self.expired = False
        self.cancelled = False
        self._lock = threading.Lock()

    def capture(self, response: Any, decode: bool = False) -> Iterator[Any]:
        with self._lock:
            self.response = response
            expired = self.expired
        if expired:
            self._shut()
        helper = type(self.api)._stream_helper  # type: ignore[attr-defined]
        return iter(helper(self.api, response, decode=decode))

    def expire(self) -> None:
        with self._lock:
            self.expired = True
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
) -> str:
    """Build the context `tarball` (never pulling) and return the new image's id. Past the
    deadline or on `cancel` the build is abandoned; either way a build that fails leaves no
    image of its own behind (`remove_layers`)."""
    # A shallow copy (sharing the connection pool) whose stream helper is ours; copy.copy
    # would go through requests.Session's pickling state and lose docker-py's attributes.
    api = object.__new__(type(client.api))
    api.__dict__.update(client.api.__dict__)
    stream = _Stream(api)
    api._stream_helper = stream.capture  # type: ignore[attr-defined]
    done = threading.Event()
    started = time.monotonic()

    def watch() -> None:
        deadline = started + max(timeout_s, 0.0)
        while not done.wait(min(0.2, max(deadline - time.monotonic(), 0.0))):
            if cancel is not None and cancel.is_set():
                stream.cancelled = True
            elif time.monotonic() < deadline:
                continue
            stream.expire()
            return

    watcher = threading.Thread(target=watch, name="examhall-build-deadline", daemon=True)
    image_id: str | None = None
    watcher.start()
    try:
        for chunk in api.build(
            fileobj=io.BytesIO(tarball),
            custom_context=True,
            tag=tag,
            labels=labels,
            buildargs=buildargs or {},
            rm=True,
            forcerm=True,
            pull=False,
            decode=True,
            network_mode=limits.network,
            container_limits={
                "memory": limits.memory,
                "memswap": limits.memory,
                "cpushares": limits.cpu_shares,
            },
        ):
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
                raise BuildError(message, log)
        if stream.expired:
            raise _abandoned(stream, timeout_s, log)
        if image_id is None:
            raise BuildError(
                f"the build ended after {time.monotonic() - started:.0f} s without an image", log
            )
    except docker.errors.DockerException as exc:
        remove_layers(client, log)
        if stream.expired:
            raise _abandoned(stream, timeout_s, log) from exc
        raise BuildError(str(exc), log) from exc
    except BaseException as exc:
        remove_layers(client, log)
        # The shut-down connection surfaces as whatever urllib3 makes of it.
        if stream.expired and not isinstance(exc, BuildError):
            raise _abandoned(stream, timeout_s, log) from exc
        raise
    finally:
        done.set()
    return image_id


def _abandoned(stream: _Stream, timeout_s: float, log: BuildLog) -> BuildError:
    if stream.cancelled:
        message = "the build was cancelled"
        log.add(message)
        return BuildError(message, log, cancelled=True)
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
        try:
            image = client.images.get(layer)
            if image.tags:
                continue
            client.images.remove(layer, noprune=True)
        except docker.errors.NotFound:
            continue
        except docker.errors.APIError:
            # In use (a child image, a running container): not this build's to remove.
            continue
