"""The build proxy (sandbox/build_proxy.py) on loopback: it forwards plain HTTP and CONNECT
tunnels to the hosts it allows, and refuses, with a 403 that says why, a host not listed, a
port not allowed, and a listed name that resolves to an address the box keeps to itself.

The upstream is a server this test starts on loopback; the proxy is told that the listed
names resolve to it (its resolver is a parameter), so no traffic leaves the machine."""

from __future__ import annotations

import http.server
import socket
import threading
from collections.abc import Callable, Iterator

import pytest

from sandbox.build_proxy import BuildProxy, Policy, parse_entries, refused_address


class _Upstream(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = f"path={self.path} host={self.headers.get('Host')}".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def upstream() -> Iterator[int]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Upstream)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


@pytest.fixture
def proxy(upstream: int) -> Iterator[Callable[..., tuple[int, list[str]]]]:
    servers: list[BuildProxy] = []

    def start(
        refuse: Callable[[str], bool] = lambda address: False,
        resolve: Callable[[str, int], list[str]] = lambda host, port: ["127.0.0.1"],
        exact: frozenset[tuple[str, int]] = frozenset(),
    ) -> tuple[int, list[str]]:
        logged: list[str] = []
        policy = Policy(
            frozenset({"mirror.test", "*.pkgs.test"}),
            exact,
            ports=frozenset({upstream}),
            resolve=resolve,
            refuse=refuse,
        )
        server = BuildProxy(("127.0.0.1", 0), policy, log=logged.append)
        threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
        servers.append(server)
        return server.server_address[1], logged

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def exchange(port: int, request: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(request)
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
    return received


def test_plain_http_to_a_listed_host_is_forwarded_in_origin_form(
    proxy: Callable[..., tuple[int, list[str]]], upstream: int
) -> None:
    port, logged = proxy()
    answer = exchange(
        port,
        f"GET http://mirror.test:{upstream}/debian/dists/x HTTP/1.1\r\n"
        f"Host: mirror.test:{upstream}\r\nProxy-Connection: keep-alive\r\n"
        "Connection: close\r\n\r\n".encode(),
    )
    assert answer.startswith(b"HTTP/1.0 200")
    assert answer.endswith(f"path=/debian/dists/x host=mirror.test:{upstream}".encode())
    assert logged == [f"allowed mirror.test:{upstream} (127.0.0.1)"]


def test_a_connect_tunnel_to_a_host_under_a_listed_domain_carries_bytes(
    proxy: Callable[..., tuple[int, list[str]]], upstream: int
) -> None:
    port, _ = proxy()
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(f"CONNECT files.pkgs.test:{upstream} HTTP/1.1\r\n\r\n".encode())
        assert sock.recv(1024) == b"HTTP/1.1 200 Connection established\r\n\r\n"
        sock.sendall(b"GET /wheel HTTP/1.1\r\nHost: files.pkgs.test\r\nConnection: close\r\n\r\n")
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
    assert received.endswith(b"path=/wheel host=files.pkgs.test")


@pytest.mark.parametrize(
    ("request_line", "why"),
    [
        ("GET http://elsewhere.test:{port}/ HTTP/1.1", "elsewhere.test is not among the hosts"),
        ("CONNECT pkgs.test.evil:{port} HTTP/1.1", "is not among the hosts"),
        ("CONNECT mirror.test:22 HTTP/1.1", "port 22 is not one builds may reach"),
        ("GET /relative HTTP/1.1", "names an absolute http:// URL"),
    ],
)
def test_what_is_not_allowed_is_refused_with_the_reason(
    proxy: Callable[..., tuple[int, list[str]]], upstream: int, request_line: str, why: str
) -> None:
    port, _ = proxy()
    answer = exchange(port, (request_line.format(port=upstream) + "\r\n\r\n").encode())
    assert answer.split(b"\r\n", 1)[0] in (b"HTTP/1.1 403 Forbidden", b"HTTP/1.1 400 Bad Request")
    assert why.encode() in answer


def test_a_listed_name_that_resolves_to_the_boxs_own_addresses_is_refused(
    proxy: Callable[..., tuple[int, list[str]]], upstream: int
) -> None:
    # The resolver answers what a hostile DNS or a cloud would: loopback, link-local.
    port, logged = proxy(
        refuse=refused_address, resolve=lambda host, port: ["127.0.0.1", "169.254.169.254"]
    )
    answer = exchange(port, f"CONNECT mirror.test:{upstream} HTTP/1.1\r\n\r\n".encode())
    assert answer.startswith(b"HTTP/1.1 403")
    assert b"resolves only to addresses builds may not reach" in answer
    assert logged and logged[0].startswith("refused mirror.test")


@pytest.mark.parametrize(
    ("address", "refused"),
    [
        ("127.0.0.1", True),
        ("::1", True),
        ("::ffff:127.0.0.1", True),
        ("169.254.169.254", True),
        ("0.0.0.0", True),
        ("224.0.0.1", True),
        # Private, shared and reserved: the engine's bridge gateway reaches the host's
        # services bound to 0.0.0.0, a LAN its neighbours, a carrier its own.
        ("172.17.0.1", True),
        ("10.0.0.8", True),
        ("192.168.1.1", True),
        ("100.64.0.1", True),
        ("192.0.0.9", True),
        ("240.0.0.1", True),
        ("255.255.255.255", True),
        ("fd00::1", True),
        ("fe80::1", True),
        ("::ffff:10.0.0.1", True),
        # IPv4 inside IPv6, by NAT64 and 6to4: the metadata endpoint, the bridge's gateway.
        ("64:ff9b::a9fe:a9fe", True),
        ("2002:ac11:1::1", True),
        ("::a9fe:a9fe", True),
        ("64:ff9b::9765:df", False),
        ("151.101.0.223", False),
        ("2a04:4e42::223", False),
        # Nothing on the internet is in a documentation range; an egress interceptor answers
        # public names with one (this project's CI machine: 203.0.113.80 for every name).
        ("203.0.113.80", False),
    ],
)
def test_which_addresses_are_the_boxs_own(address: str, refused: bool) -> None:
    assert refused_address(address) is refused


def test_a_private_address_is_reached_only_when_the_operator_named_host_and_port(
    proxy: Callable[..., tuple[int, list[str]]], upstream: int
) -> None:
    """A listed name that resolves to a private address (a hostile DNS answer, or the
    bridge's gateway) is refused; the same server named as HOST:PORT is the operator's."""
    private = lambda host, port: ["127.0.0.1"]  # noqa: E731 -- stands for 172.17.0.1
    refuse = lambda address: address == "127.0.0.1" or refused_address(address)  # noqa: E731
    port, _ = proxy(refuse=refuse, resolve=private)
    answer = exchange(port, f"CONNECT mirror.test:{upstream} HTTP/1.1\r\n\r\n".encode())
    assert answer.startswith(b"HTTP/1.1 403"), answer
    assert f"named as mirror.test:{upstream}".encode() in answer, answer
    port, _ = proxy(refuse=refuse, resolve=private, exact=frozenset({("mirror.test", upstream)}))
    request = f"GET http://mirror.test:{upstream}/x HTTP/1.1\r\nHost: mirror.test\r\n\r\n"
    assert b"path=/x" in exchange(port, request.encode())


def test_allow_entries_are_names_and_host_ports() -> None:
    hosts, exact = parse_entries("deb.debian.org, *.pypi.org,10.0.0.5:3141,Mirror.LAN.:8080,")
    assert hosts == {"deb.debian.org", "*.pypi.org"}
    assert exact == {("10.0.0.5", 3141), ("mirror.lan", 8080)}
