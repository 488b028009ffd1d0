"""The HTTP side of examhall's forward proxies: reading what a client asks a proxy for.

Two proxies speak it: the build proxy (sandbox/build_proxy.py), which connects itself, and a
trial's egress front (sandbox/egress.py), which asks the control plane to connect. Both take
`CONNECT host:port` (HTTPS, as pip and curl send it through `https_proxy`) and absolute-form
requests (`GET http://host/path`, as apt and pip send plain HTTP through `http_proxy`); the
latter are passed on in origin-form with the proxy's own headers dropped.
"""

from __future__ import annotations

import contextlib
import socket
from dataclasses import dataclass

HEAD_LIMIT = 64 * 1024  # a request line and headers; more is no request
_REASONS = {400: "Bad Request", 403: "Forbidden", 502: "Bad Gateway", 504: "Gateway Timeout"}


class BadRequest(ValueError):
    """Not a request a forward proxy can serve; the message says why, for a 400."""


@dataclass(frozen=True)
class ProxyRequest:
    host: str
    port: int  # -1 when the client's port is not a number
    tunnel: bool  # CONNECT: the client speaks once it is told the tunnel is open
    first: bytes  # what goes upstream first: the rewritten request, or what followed CONNECT


def read_head(client: socket.socket) -> tuple[bytes, bytes] | None:
    """The first request's head, and whatever the client sent after it; None when the client
    closed first. A ValueError past HEAD_LIMIT."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = client.recv(4096)
        if not chunk:
            return None
        data += chunk
        if len(data) > HEAD_LIMIT:
            raise ValueError("request head too large")
    head, _, after = data.partition(b"\r\n\r\n")
    return head, after


def parse_request(head: bytes, after: bytes, *, close: bool = False) -> ProxyRequest:
    """What the client asks for. With `close`, a plain request goes upstream with
    `Connection: close`, so that the client's next request (which may name another host)
    comes on a connection of its own."""
    request_line, rest = head.split(b"\r\n", 1) if b"\r\n" in head else (head, b"")
    try:
        method, target, version = request_line.decode("latin-1").split(" ")
    except ValueError:
        raise BadRequest("not an HTTP request line") from None
    if method.upper() == "CONNECT":
        host, _, port_text = target.rpartition(":")
        return ProxyRequest(host.strip("[]"), _port(port_text), True, after)
    if not target.lower().startswith("http://"):
        raise BadRequest("a proxy request names an absolute http:// URL")
    authority, slash, path = target[len("http://") :].partition("/")
    host, colon, port_text = authority.rpartition(":")
    if not colon or "]" in port_text:
        host, port_text = authority, "80"
    dropped = (b"proxy-", b"connection:", b"keep-alive:") if close else (b"proxy-",)
    headers = [
        line for line in rest.split(b"\r\n") if line and not line.lower().startswith(dropped)
    ]
    if close:
        headers.append(b"Connection: close")
    first = (
        f"{method} {slash}{path} {version}\r\n".encode("latin-1")
        + b"".join(line + b"\r\n" for line in headers)
        + b"\r\n"
        + after
    )
    return ProxyRequest(host.strip("[]"), _port(port_text), False, first)


def answer(client: socket.socket, status: int, message: str) -> None:
    """A short plain-text answer that closes the exchange; a client already gone is fine."""
    body = (message + "\n").encode()
    head = (
        f"HTTP/1.1 {status} {_REASONS[status]}\r\nContent-Type: text/plain\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    with contextlib.suppress(OSError):
        client.sendall(head.encode() + body)


TUNNEL_OPEN = b"HTTP/1.1 200 Connection established\r\n\r\n"


def _port(text: str) -> int:
    return int(text) if text.isdigit() and len(text) <= 5 else -1
