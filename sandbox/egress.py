"""A trial's way out, when its job's egress policy gives it one: a proxy front inside the
sandbox whose every connection is made by the control plane, over the channel.

The sandbox keeps `--network none`. The root supervisor listens on loopback, one port for
the agent's phase and one for the verifier's (so that each connection is known by the phase
that made it), and hands the ports to the task's processes as `http_proxy`/`https_proxy`.
For each request the front reads the head (sandbox/proxy_http.py), asks the control plane to
open host:port (`egress_open`), and on its yes carries the bytes both ways as base64 lines
(`egress_data`, `egress_close`). The control plane decides: the policy's hosts, the trial's
byte cap, the addresses it refuses (service/launch/egress.py). Nothing here decides what is
allowed, so nothing here can be talked into more: a process that bypasses the front reaches
no network at all.

Every connection is recorded by the control plane, which makes it (service/launch/
egress.py): so a connection the sandbox could not report, cut when the trial passed its byte
cap and its sandbox was stopped, is in the transcript as well.
"""

from __future__ import annotations

import base64
import contextlib
import itertools
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from sandbox.proxy_http import TUNNEL_OPEN, BadRequest, answer, parse_request, read_head

Phase = Literal["agent", "verifier"]
CHUNK = 64 * 1024  # bytes of one data line, before base64
OPEN_WAIT_S = 60.0  # the control plane's answer to an open (its connect has 30 s)
IDLE_S = 300.0  # a client that sends nothing for this long is closed
MAX_CONNECTIONS = 64  # open at once, per front
PROXY_ENV = ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY")
NO_PROXY = "localhost,127.0.0.1,::1"


@dataclass(frozen=True)
class EgressOpenMessage:
    """worker -> control plane: open host:port for connection `id`."""

    id: int
    host: str
    port: int
    phase: Phase
    type: Literal["egress_open"] = "egress_open"


@dataclass(frozen=True)
class EgressDataMessage:
    """Either way: bytes of connection `id`."""

    id: int
    data: str  # base64
    type: Literal["egress_data"] = "egress_data"


@dataclass(frozen=True)
class EgressCloseMessage:
    """Either way: the sender's side of connection `id` is done. From the control plane,
    `error` says how the upstream broke it off (a reset), where an end is not its own."""

    id: int
    error: str | None = None
    type: Literal["egress_close"] = "egress_close"


@dataclass(frozen=True)
class EgressOpenedMessage:
    """control plane -> worker: connection `id` is open, or why not."""

    id: int
    error: str | None = None
    type: Literal["egress_opened"] = "egress_opened"


# The control plane's lines that the supervisor keeps for the front, not the worker's child.
FOR_FRONT = frozenset({"egress_opened", "egress_data", "egress_close"})


def proxy_env(port: int) -> dict[str, str]:
    """The variables that send a process's HTTP and HTTPS through the front on `port`."""
    url = f"http://127.0.0.1:{port}"
    return {**dict.fromkeys(PROXY_ENV, url), "no_proxy": NO_PROXY, "NO_PROXY": NO_PROXY}


@dataclass
class _Connection:
    id: int
    host: str
    port: int
    phase: Phase
    client: socket.socket
    opened: threading.Event = field(default_factory=threading.Event)
    error: str | None = None
    upstream_done: bool = False


class EgressFront:
    """The fronts of one trial. `send` writes one message to the control plane."""

    def __init__(self, send: Callable[[object], None]) -> None:
        self._send = send
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._open: dict[int, _Connection] = {}
        self._listeners: dict[Phase, socket.socket] = {}
        self._slots: dict[Phase, threading.BoundedSemaphore] = {}

    def listen(self, phase: Phase) -> int:
        """Start the front of `phase` on a loopback port of its own; the port."""
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.bind(("127.0.0.1", 0))
        listener.listen(64)
        self._listeners[phase] = listener
        self._slots[phase] = threading.BoundedSemaphore(MAX_CONNECTIONS)
        threading.Thread(
            target=self._accept,
            args=(phase, listener),
            name=f"examhall-egress-{phase}",
            daemon=True,
        ).start()
        port: int = listener.getsockname()[1]
        return port

    def stop(self, phase: Phase) -> None:
        """Close the front of `phase` and every connection it made."""
        listener = self._listeners.pop(phase, None)
        if listener is not None:
            with contextlib.suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)
            listener.close()
        with self._lock:
            ending = [c for c in self._open.values() if c.phase == phase]
        for connection in ending:
            self._finish(connection)

    def finish(self) -> None:
        """Close everything."""
        for phase in list(self._listeners):
            self.stop(phase)

    def on_message(self, message: dict[str, Any]) -> None:
        """A line of the control plane's for the front (FOR_FRONT)."""
        ident = message.get("id")
        with self._lock:
            connection = self._open.get(ident) if isinstance(ident, int) else None
        if connection is None:
            return  # closed here meanwhile
        kind = message.get("type")
        if kind == "egress_opened":
            error = message.get("error")
            connection.error = str(error) if error is not None else None
            connection.opened.set()
        elif kind == "egress_data":
            data = base64.b64decode(str(message.get("data", "")))
            try:
                connection.client.sendall(data)
            except OSError:
                self._finish(connection)
        elif kind == "egress_close":
            connection.upstream_done = True
            connection.opened.set()  # a close before an answer is a refusal
            with contextlib.suppress(OSError):
                connection.client.shutdown(socket.SHUT_WR)

    # -- internals

    def _accept(self, phase: Phase, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return  # stopped
            if not self._slots[phase].acquire(blocking=False):
                answer(client, 502, "examhall's egress proxy is at its connection limit")
                client.close()
                continue
            threading.Thread(
                target=self._serve, args=(phase, client), name="examhall-egress", daemon=True
            ).start()

    def _serve(self, phase: Phase, client: socket.socket) -> None:
        try:
            self._exchange(phase, client)
        finally:
            self._slots[phase].release()

    def _exchange(self, phase: Phase, client: socket.socket) -> None:
        client.settimeout(IDLE_S)
        try:
            read = read_head(client)
            if read is None:
                client.close()
                return
            request = parse_request(*read, close=True)
        except (OSError, ValueError) as exc:
            if isinstance(exc, BadRequest):
                answer(client, 400, str(exc))
            client.close()
            return
        connection = _Connection(next(self._ids), request.host, request.port, phase, client)
        with self._lock:
            self._open[connection.id] = connection
        self._send(EgressOpenMessage(connection.id, request.host, request.port, phase))
        if not connection.opened.wait(OPEN_WAIT_S):
            connection.error = "the control plane did not answer"
        if connection.error is not None or connection.upstream_done:
            why = connection.error or "the control plane closed it"
            answer(client, 403, f"examhall refused {request.host}:{request.port}: {why}")
            self._finish(connection)
            return
        try:
            if request.tunnel:
                client.sendall(TUNNEL_OPEN)
            self._forward(connection, request.first)
            while data := client.recv(CHUNK):
                self._forward(connection, data)
        except OSError:
            pass
        self._finish(connection)

    def _forward(self, connection: _Connection, data: bytes) -> None:
        for start in range(0, len(data), CHUNK):
            chunk = data[start : start + CHUNK]
            self._send(EgressDataMessage(connection.id, base64.b64encode(chunk).decode()))

    def _finish(self, connection: _Connection) -> None:
        with self._lock:
            if self._open.pop(connection.id, None) is None:
                return  # finished already
        with contextlib.suppress(OSError):
            connection.client.close()
        with contextlib.suppress(OSError):
            self._send(EgressCloseMessage(connection.id))
