"""The forward proxy that environment builds reach the package mirrors through.

A team's `RUN` steps run on a network with no route anywhere (service/backends/docker/
build_network.py): the one address they can reach is this proxy's. It forwards plain HTTP
(absolute-form requests, as apt sends them through `http_proxy`) and `CONNECT` tunnels (as pip
and curl use for HTTPS) to the named hosts the operator allows (EXAMHALL_BUILD_EGRESS), on
ports 80 and 443 alone, and refuses everything else with a 403 that says why. A name is
resolved here, and an address where the box's own or its neighbours' services are is refused
whatever name led to it (refused_address): loopback, link-local (and so a cloud's metadata
endpoint), private (10/8, 172.16/12, 192.168/16, fc00::/7, where the engine's bridge gateway
reaches the host's own services), shared (100.64/10), unspecified, multicast and reserved.
A `HOST:PORT` entry is the operator naming one server of its own network (a
mirror on the LAN): it is reached on that port at whatever address it resolves to.

Run in a container of the sandbox image (stdlib only):

    python3 -m sandbox.build_proxy --listen 0.0.0.0:3128 --allow deb.debian.org,*.pypi.org
"""

from __future__ import annotations

import argparse
import ipaddress
import select
import socket
import socketserver
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from sandbox.proxy_http import TUNNEL_OPEN, BadRequest, answer, parse_request, read_head

IDLE_S = 120.0  # a tunnel or a response that moves nothing for this long is closed
MAX_CONNECTIONS = 64

Resolver = Callable[[str, int], list[str]]


def _resolve(host: str, port: int) -> list[str]:
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


# Where a box's own services and its neighbours' are reached: this host and "this network",
# private networks (the engine's bridge gateway reaches the host's services bound to
# 0.0.0.0), shared address space (a carrier's NAT), link-local (a cloud's metadata endpoint),
# IETF protocol assignments, multicast, reserved and broadcast, and IPv6's equivalents.
# Documentation and benchmarking ranges (192.0.2.0/24, 203.0.113.0/24, 198.18.0.0/15, ...) are
# not among them: nothing on the internet is there, and a network's egress interceptor answers
# public names with them (this project's CI machine answers 203.0.113.80 for every name).
_BOX_NETWORKS = tuple(
    ipaddress.ip_network(net)
    for net in (
        "0.0.0.0/8",
        "10.0.0.0/8",
        "100.64.0.0/10",
        "127.0.0.0/8",
        "169.254.0.0/16",
        "172.16.0.0/12",
        "192.0.0.0/24",
        "192.168.0.0/16",
        "224.0.0.0/3",
        "::/96",  # IPv4-compatible (deprecated), and the unspecified and loopback addresses
        "fc00::/7",
        "fe80::/10",
        "ff00::/8",
    )
)


# NAT64's well-known prefix: 64:ff9b::a.b.c.d reaches a.b.c.d on a network that has one.
_NAT64 = ipaddress.ip_network("64:ff9b::/96")


def refused_address(address: str) -> bool:
    """Whether `address` is where the box's own or its neighbours' services are (never a
    package mirror), so never reached by a name alone."""
    ip = ipaddress.ip_address(address)
    if isinstance(ip, ipaddress.IPv6Address):
        # An IPv4 address inside an IPv6 one reaches that IPv4 address: judged as it.
        embedded = ip.ipv4_mapped or ip.sixtofour
        if embedded is None and ip in _NAT64:
            embedded = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
        if embedded is not None:
            ip = embedded
    return any(ip in net for net in _BOX_NETWORKS if net.version == ip.version)


@dataclass(frozen=True)
class Policy:
    hosts: frozenset[str]  # exact names, or "*.suffix" for any name under it
    # HOST:PORT entries: the operator's own servers, reached on that port at any address.
    exact: frozenset[tuple[str, int]] = frozenset()
    ports: frozenset[int] = frozenset({80, 443})
    resolve: Resolver = _resolve
    refuse: Callable[[str], bool] = refused_address
    # Who the policy holds, and where its hosts are set, as its refusals say them.
    who: str = "builds"
    source: str = "EXAMHALL_BUILD_EGRESS"

    def allows_host(self, host: str) -> bool:
        host = host.lower().rstrip(".")
        if host in self.hosts:
            return True
        return any(
            pattern.startswith("*.") and host.endswith(pattern[1:]) for pattern in self.hosts
        )

    def addresses(self, host: str, port: int) -> tuple[list[str], str | None]:
        """Where `host:port` may be reached, or why not."""
        if (host.lower().rstrip("."), port) in self.exact:
            try:
                return self.resolve(host, port), None
            except OSError as exc:
                return [], f"{host} does not resolve ({exc})"
        if port not in self.ports:
            return [], f"port {port} is not one {self.who} may reach ({sorted(self.ports)})"
        if not self.allows_host(host):
            return [], f"{host} is not among the hosts {self.who} may reach ({self.source})"
        try:
            found = self.resolve(host, port)
        except OSError as exc:
            return [], f"{host} does not resolve ({exc})"
        allowed = [a for a in found if not self.refuse(a)]
        if not allowed:
            return [], (
                f"{host} resolves only to addresses {self.who} may not reach ({found}): the "
                f"box's own or its network's; a server of the box's own network is named as "
                f"{host}:{port} in {self.source}"
            )
        return allowed, None


@dataclass
class _Counters:
    lock: threading.Lock = field(default_factory=threading.Lock)
    open: int = 0


class _Handler(socketserver.BaseRequestHandler):
    server: BuildProxy

    def handle(self) -> None:
        client: socket.socket = self.request
        client.settimeout(IDLE_S)
        try:
            read = read_head(client)
        except (OSError, ValueError):
            return
        if read is None:
            return
        try:
            # A plain request's follow-ups (apt pipelines them) go as they are, to this host
            # alone whatever they name.
            request = parse_request(*read)
        except BadRequest as exc:
            answer(client, 400, str(exc))
            return
        upstream = self._connect(client, request.host, request.port)
        if upstream is None:
            return
        if request.tunnel:
            client.sendall(TUNNEL_OPEN)
        _relay(client, upstream, first=request.first)

    def _connect(self, client: socket.socket, host: str, port: int) -> socket.socket | None:
        addresses, why = self.server.policy.addresses(host, port)
        if why is not None:
            self.server.log(f"refused {host}:{port}: {why}")
            answer(client, 403, f"examhall's build proxy refused {host}:{port}: {why}")
            return None
        for address in addresses:
            try:
                upstream = socket.create_connection((address, port), timeout=30)
            except OSError:
                continue
            upstream.settimeout(IDLE_S)
            self.server.log(f"allowed {host}:{port} ({address})")
            return upstream
        self.server.log(f"could not reach {host}:{port} ({', '.join(addresses)})")
        answer(client, 502, f"examhall's build proxy could not reach {host}:{port}")
        return None


def _relay(one: socket.socket, other: socket.socket, first: bytes = b"") -> None:
    """Bytes both ways between the client `one` and the server `other` (`first` already
    read from the client), until either closes or both idle for IDLE_S."""
    pairs = {one: other, other: one}
    try:
        if first:
            other.sendall(first)
        while True:
            readable, _, _ = select.select(list(pairs), [], [], IDLE_S)
            if not readable:
                return
            for sock in readable:
                data = sock.recv(65536)
                if not data:
                    return
                pairs[sock].sendall(data)
    except OSError:
        return
    finally:
        other.close()


class BuildProxy(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(
        self,
        address: tuple[str, int],
        policy: Policy,
        log: Callable[[str], None] | None = None,
    ) -> None:
        self.policy = policy
        self._log = log or (lambda line: print(line, flush=True))
        self._slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
        super().__init__(address, _Handler)

    def log(self, line: str) -> None:
        self._log(line)

    def process_request(self, request: socket.socket, client_address: object) -> None:  # type: ignore[override]
        if not self._slots.acquire(blocking=False):
            answer(request, 502, "examhall's build proxy is at its connection limit")
            self.shutdown_request(request)
            return
        super().process_request(request, client_address)

    def process_request_thread(self, request: socket.socket, client_address: object) -> None:  # type: ignore[override]
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()


def parse_entries(value: str) -> tuple[frozenset[str], frozenset[tuple[str, int]]]:
    """`host,*.suffix,host:port,...` as the names, and the HOST:PORT entries."""
    hosts: set[str] = set()
    exact: set[tuple[str, int]] = set()
    for entry in (e.strip().lower().rstrip(".") for e in value.split(",")):
        host, colon, port = entry.rpartition(":")
        if colon and port.isdigit() and 0 < int(port) < 65536:
            exact.add((host.rstrip("."), int(port)))
        elif entry:
            hosts.add(entry)
    return frozenset(hosts), frozenset(exact)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--listen", default="0.0.0.0:3128")
    parser.add_argument(
        "--allow", required=True, help="comma-separated hosts, *.suffix and host:port allowed"
    )
    args = parser.parse_args(argv)
    host, _, port = args.listen.rpartition(":")
    hosts, exact = parse_entries(args.allow)
    server = BuildProxy((host, int(port)), Policy(hosts, exact))
    print(f"examhall build proxy on {args.listen}, for {args.allow}", flush=True)
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
