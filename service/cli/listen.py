"""Binding the control plane's port before anything else starts."""

from __future__ import annotations

import errno
import socket

from service.settings import ConfigError


def bind(host: str, port: int) -> socket.socket:
    """A socket bound to host:port, for uvicorn to listen on. `examhall serve` binds first
    so that a port already in use fails at once, before migrations, recovery (which may
    requeue trials and remove containers) and the scheduler have run."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
    except socket.gaierror as exc:
        raise ConfigError(f"Cannot listen on {host}: {exc.strerror}. Check --host.") from None
    sock = socket.socket(family, kind, proto)
    # As uvicorn does: a restart may take over a port whose old connections linger in
    # TIME_WAIT. (On Linux this never lets two servers listen on one port.)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise ConfigError(
                f"Port {port} on {host} is already in use (another examhall serve, or another "
                "program, listens there). Stop it, or choose another port with --port."
            ) from None
        raise ConfigError(f"Cannot listen on {host}:{port}: {exc.strerror}.") from None
    sock.set_inheritable(True)
    return sock
