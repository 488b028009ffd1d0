"""Naming a control-plane process, and telling whether one is gone.

Every sandbox a control plane starts carries its owner, and every plane's heartbeat row is
keyed by it, so that a plane can tell its own sandboxes from a live peer's and from those a
dead plane left behind.
"""

from __future__ import annotations

import os
import socket
import uuid


def instance_id() -> str:
    """This control-plane process: host, pid and a nonce (pids are reused)."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def owner_gone(owner: str) -> bool:
    """Whether the process named by an owner is known to be dead: it ran on this host and its
    pid is gone. Owners on other hosts are never presumed dead."""
    host, _, rest = owner.partition(":")
    pid_text = rest.partition(":")[0]
    if host != socket.gethostname() or not pid_text.isdigit():
        return False
    try:
        os.kill(int(pid_text), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False
