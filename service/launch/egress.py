"""The control plane's end of a trial's egress (sandbox/egress.py is the sandbox's): it
decides every connection the trial asks for, makes the allowed ones itself, and carries
their bytes over the channel.

A connection is allowed when the job's policy names its host (on ports 80 and 443, or on the
one port a `host:port` entry names) and, for a task that lists its own `allowed_hosts`, the
task names it too. A name is resolved here, and one that resolves to an address the box keeps
to itself or its network's (loopback, link-local and so a cloud's metadata endpoint,
private, shared, reserved: sandbox/build_proxy.py refused_address) is refused, as the build
proxy refuses it; a `host:port` entry is the operator's own choice and reaches the address
it names. Bytes both ways count against the trial's cap; past it
every connection is closed and the trial ends as `limit_exceeded`.

Every connection is recorded here, where it is made, as one `egress` detail for the trial's
transcript: the phase, host:port, the answer (allowed, or refused and why), the bytes each
way and, when it was cut (the upstream broke off, or the trial passed its byte cap), how.
The sandbox, which the cap stops, could not report the connections it cut. Past
MAX_CONNECTIONS every open is refused, and those are counted in one last detail.

Policies are the operator's (service/domain/egress.py).
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import logging
import socket
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from sandbox.build_proxy import Policy
from sandbox.egress import (
    CHUNK,
    EgressCloseMessage,
    EgressDataMessage,
    EgressOpenedMessage,
    EgressOpenMessage,
)
from service.domain.egress import NAME, EgressPolicy
from service.domain.job_spec import OFFLINE

log = logging.getLogger(__name__)

CONNECT_S = 30.0
SEND_S = 30.0  # an upstream that takes no bytes for this long is closed
MAX_CONNECTIONS = 1000  # per trial: a loop of opens is refused past it

EgressMessage = EgressOpenMessage | EgressDataMessage | EgressCloseMessage


@dataclass(frozen=True)
class TrialEgress:
    """What one trial may reach: the job's policy, the task's own list (None: any host of
    the policy), and the bytes both ways it may move."""

    policy: EgressPolicy
    task_hosts: frozenset[str] | None
    max_bytes: int

    def check(self, host: str, port: int) -> tuple[list[str], str | None]:
        """The addresses `host:port` may be reached at, or why not."""
        host = host.lower().rstrip(".")
        if not NAME.match(host) or host.startswith("*"):
            return [], f"{host[:80]!r} is not a host name"
        if self.task_hosts is not None and not Policy(self.task_hosts).allows_host(host):
            return [], f"{host} is not among the task's allowed_hosts"
        named = Policy(
            self.policy.hosts,
            self.policy.exact,
            who="this trial",
            source=f"egress policy {self.policy.name}",
        )
        return named.addresses(host, port)


@dataclass
class _Upstream:
    sock: socket.socket
    phase: str
    where: str  # host:port, as the sandbox asked for it
    sent: int = 0  # sandbox -> upstream
    received: int = 0  # upstream -> sandbox


@dataclass
class EgressGate:
    """One trial's connections. `send` writes a message to the sandbox; `on_exceeded` is
    told once, when the trial moves more than its bytes; `record` gets each connection's
    detail when it ends (from the connections' threads)."""

    egress: TrialEgress
    send: Callable[[object], None]
    on_exceeded: Callable[[str], None]
    record: Callable[[str], None] = lambda detail: None
    moved: int = 0
    exceeded: str | None = None
    closing: str | None = None  # why no connection is carried any more
    opened: int = 0
    _open: dict[int, _Upstream] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def handle(self, message: EgressMessage) -> None:
        """A message of the sandbox's; never blocks for an upstream's connect."""
        if isinstance(message, EgressOpenMessage):
            threading.Thread(
                target=self._connect, args=(message,), name="examhall-egress", daemon=True
            ).start()
            return
        with self._lock:
            upstream = self._open.get(message.id)
        if upstream is None:
            return  # closed meanwhile
        if isinstance(message, EgressCloseMessage):
            with contextlib.suppress(OSError):
                upstream.sock.shutdown(socket.SHUT_WR)
            return
        try:
            data = base64.b64decode(message.data, validate=True)
        except (binascii.Error, ValueError):
            self._close(message.id, tell=True)
            return
        upstream.sent += len(data)
        if not self._count(len(data)):
            return
        try:
            upstream.sock.sendall(data)
        except OSError:
            self._close(message.id, tell=True)

    def close(self, why: str | None = None) -> None:
        """Close every connection: the trial is over, or `why` it was cut short. A
        connection still being made is refused when it is (its record says so)."""
        with self._lock:
            self.closing = self.closing or why or "the trial ended"
            ids = list(self._open)
        for ident in ids:
            self._close(ident, tell=False, error=why)
        with self._lock:
            over, self.opened = self.opened - MAX_CONNECTIONS, min(self.opened, MAX_CONNECTIONS)
        if over > 0:
            self.record(f"{over} more connections refused: more than {MAX_CONNECTIONS}")

    # -- internals

    def _connect(self, message: EgressOpenMessage) -> None:
        try:
            self._open_and_pump(message)
        except Exception:
            log.exception("egress connection %s to %s failed", message.id, message.host[:80])
            self._close(message.id, tell=True)

    def _open_and_pump(self, message: EgressOpenMessage) -> None:
        with self._lock:
            self.opened += 1
            over = self.opened > MAX_CONNECTIONS
            ended = self.exceeded if self.exceeded is not None else self.closing
        why: str | None = f"the trial opened more than {MAX_CONNECTIONS} connections"
        addresses: list[str] = []
        if ended is not None:
            over, why = False, ended  # recorded below, with the reason
        elif not over:
            addresses, why = self.egress.check(message.host, message.port)
        sock = None
        for address in addresses:
            try:
                sock = socket.create_connection((address, message.port), timeout=CONNECT_S)
                break
            except OSError as exc:
                why = f"{message.host}:{message.port} could not be reached ({exc})"
        where = f"{message.host[:200]}:{message.port}"
        if sock is None:
            if not over:  # past the limit, counted in close()'s last detail instead
                self.record(f"{message.phase} {where} refused: {why}, 0 bytes out, 0 in")
            self.send(EgressOpenedMessage(message.id, error=why or "refused"))
            return
        sock.settimeout(SEND_S)
        upstream = _Upstream(sock, message.phase, where)
        with self._lock:
            late = self.closing
            if late is None:
                self._open[message.id] = upstream
        if late is not None:  # the trial ended while this one connected: never carried
            sock.close()
            self.record(f"{message.phase} {where} refused: {late}, 0 bytes out, 0 in")
            return
        self.send(EgressOpenedMessage(message.id))
        self._pump(message.id, upstream)

    def _pump(self, ident: int, upstream: _Upstream) -> None:
        """Upstream to sandbox, until the upstream ends."""
        try:
            while data := upstream.sock.recv(CHUNK):
                upstream.received += len(data)
                if not self._count(len(data)):
                    return
                self.send(EgressDataMessage(ident, base64.b64encode(data).decode()))
        except OSError as exc:
            # Broken off rather than ended, which the client may not notice (a body sent
            # without its length looks whole): the sandbox's record of the connection says how.
            how = f"no bytes for {SEND_S:g} s" if isinstance(exc, TimeoutError) else str(exc)
            self._close(ident, tell=True, error=f"the upstream broke off ({how})")
            return
        self._close(ident, tell=True)

    def _count(self, size: int) -> bool:
        with self._lock:
            self.moved += size
            if self.moved <= self.egress.max_bytes or self.exceeded is not None:
                return self.exceeded is None
            self.exceeded = (
                f"The trial moved more than its {self.egress.max_bytes} bytes through egress "
                f"policy {self.egress.policy.name}; its sandbox was stopped."
            )
        self.close(f"the trial passed its byte cap ({self.egress.max_bytes} bytes)")
        self.on_exceeded(self.exceeded)
        return False

    def _close(self, ident: int, *, tell: bool, error: str | None = None) -> None:
        with self._lock:
            upstream = self._open.pop(ident, None)
        if upstream is None:
            return
        with contextlib.suppress(OSError):
            upstream.sock.close()
        cut = f", cut: {error[:300]}" if error else ""
        self.record(
            f"{upstream.phase} {upstream.where} allowed, {upstream.sent} bytes out, "
            f"{upstream.received} in{cut}"
        )
        if tell:
            with contextlib.suppress(OSError):
                self.send(EgressCloseMessage(ident, error=error))


def trial_egress(
    policies: Mapping[str, EgressPolicy],
    policy: str,
    wanted: str | None,
    allowed_hosts: tuple[str, ...],
    max_bytes: int,
) -> TrialEgress | None:
    """What a task's trial may reach under the job's `policy`: None (offline) when the policy
    is offline or the task asks for no network."""
    found = policies.get(policy)
    if found is None or policy == OFFLINE or wanted is None:
        return None
    return TrialEgress(found, frozenset(allowed_hosts) or None, max_bytes)
