"""Leaving root for the sandbox user, and proving it cannot come back."""

from __future__ import annotations

import ctypes
import os

PR_SET_DUMPABLE = 4
PR_GET_DUMPABLE = 3


class PrivilegeError(Exception):
    pass


def _prctl(option: int, arg: int = 0) -> int:
    libc = ctypes.CDLL(None, use_errno=True)
    result: int = libc.prctl(option, arg, 0, 0, 0)
    if result < 0:
        raise PrivilegeError(f"prctl({option}) failed: {os.strerror(ctypes.get_errno())}")
    return result


def effective_capabilities() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("CapEff:"):
                return int(line.split()[1], 16)
    raise PrivilegeError("/proc/self/status has no CapEff line.")


def drop_privileges(uid: int, gid: int) -> None:
    """Become uid/gid for good. Not dumpable afterwards, so a process of the same user
    (every tool the agent runs) can neither ptrace us nor read our /proc files or memory."""
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)
    _prctl(PR_SET_DUMPABLE, 0)


def verify_dropped(uid: int, gid: int) -> None:
    """Raise PrivilegeError unless every id is the sandbox's and no way back is left."""
    if os.getresuid() != (uid, uid, uid):
        raise PrivilegeError(f"uids are {os.getresuid()}, not all {uid}.")
    if os.getresgid() != (gid, gid, gid):
        raise PrivilegeError(f"gids are {os.getresgid()}, not all {gid}.")
    if os.getgroups():
        raise PrivilegeError(f"supplementary groups remain: {os.getgroups()}.")
    caps = effective_capabilities()
    if caps:
        raise PrivilegeError(f"effective capabilities remain: {caps:#x}.")
    if _prctl(PR_GET_DUMPABLE) != 0:
        raise PrivilegeError("the worker is still dumpable.")
    try:
        os.setuid(0)
    except PermissionError:
        return
    raise PrivilegeError("os.setuid(0) succeeded after the drop.")
