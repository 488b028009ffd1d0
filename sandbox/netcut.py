"""Leave the sandbox with the loopback interface only, where the engine could not.

A Swarm service cannot have `--network none`: its container always joins some network. The
backend gives it one of its own that reaches nothing, and asks the worker (EXAMHALL_CUT_NETWORK)
to take even that away before anything from the control plane is read: the root worker,
holding CAP_NET_ADMIN for this alone (dropped with every capability before the agent runs),
deletes every interface but `lo` over rtnetlink, so the agent sees exactly what `--network
none` shows it: `lo`, and nothing to route to.
"""

from __future__ import annotations

import errno
import os
import struct
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import socket

CUT_NETWORK_ENV = "EXAMHALL_CUT_NETWORK"
CAP_NET_ADMIN = 12

_AF_UNSPEC = 0
_RTM_DELLINK = 17
_NLMSG_ERROR = 2
_NLM_F_REQUEST = 0x1
_NLM_F_ACK = 0x4
_HEADER = struct.Struct("=IHHII")  # nlmsghdr: length, type, flags, sequence, port
_IFINFO = struct.Struct("=BxHiII")  # ifinfomsg: family, type, index, flags, change


class NetworkCutError(RuntimeError):
    pass


def requested(environ: Mapping[str, str]) -> bool:
    """Whether the backend asked the worker to take the network away."""
    return environ.get(CUT_NETWORK_ENV) == "1"


def interfaces() -> list[str]:
    import socket

    return sorted(name for _, name in socket.if_nameindex())


def cut_network() -> list[str]:
    """Delete every interface but `lo`; returns the names deleted. Fails closed."""
    # Here, not at the top: socket's start-up is a trial's cost, and only a backend that
    # cannot give the container `--network none` asks for this.
    import socket

    deleted = []
    with socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, socket.NETLINK_ROUTE) as sock:
        for sequence, (index, name) in enumerate(socket.if_nameindex(), start=1):
            if name == "lo":
                continue
            _delete_link(sock, index, sequence)
            deleted.append(name)
    left = [name for name in interfaces() if name != "lo"]
    if left:
        raise NetworkCutError(
            f"The sandbox still has network interfaces besides lo after removing them: {left}."
        )
    return deleted


def _delete_link(sock: socket.socket, index: int, sequence: int) -> None:
    body = _IFINFO.pack(_AF_UNSPEC, 0, index, 0, 0)
    flags = _NLM_F_REQUEST | _NLM_F_ACK
    sock.send(_HEADER.pack(_HEADER.size + len(body), _RTM_DELLINK, flags, sequence, 0) + body)
    reply = sock.recv(65536)
    _, kind, _, _, _ = _HEADER.unpack_from(reply)
    if kind != _NLMSG_ERROR:
        raise NetworkCutError(f"rtnetlink answered an interface's removal with message {kind}.")
    (code,) = struct.unpack_from("=i", reply, _HEADER.size)
    # A link removed by its peer's removal meanwhile (a veth pair) is gone, as wanted.
    if code not in (0, -errno.ENODEV):
        raise NetworkCutError(
            f"Could not remove network interface {index}: {os.strerror(-code)} (the sandbox "
            "needs CAP_NET_ADMIN at its start for this; the backend grants it)."
        )
