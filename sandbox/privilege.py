"""Leaving root for the sandbox user, and proving it cannot come back."""

from __future__ import annotations

import ctypes
import os

PR_SET_DUMPABLE = 4
PR_GET_DUMPABLE = 3
PR_SET_NO_NEW_PRIVS = 38
PR_GET_NO_NEW_PRIVS = 39
PR_CAPBSET_DROP = 24
CAP_SETPCAP = 8


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


def make_undumpable() -> None:
    """Keep this process's memory and /proc files from every process without
    CAP_SYS_PTRACE, root ones included (no container process has that capability)."""
    _prctl(PR_SET_DUMPABLE, 0)


# The OOM killer's scale: -1000 exempts a process, 1000 makes it the first choice.
OOM_EXEMPT = -1000
OOM_FIRST = 1000


def set_oom_score_adj(value: int, pid: int | str = "self") -> None:
    """Write a process's OOM score adjustment. Written by a process with CAP_SYS_RESOURCE it
    is also the floor that process (and what it forks later) may lower itself to."""
    with open(f"/proc/{pid}/oom_score_adj", "w") as handle:
        handle.write(str(value))


def oom_score_adj(pid: int | str = "self") -> int:
    with open(f"/proc/{pid}/oom_score_adj") as handle:
        return int(handle.read())


CAP_SYS_RESOURCE = 24


def bounding_capabilities() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("CapBnd:"):
                return int(line.split()[1], 16)
    raise PrivilegeError("/proc/self/status has no CapBnd line.")


def has_bounding_capability(number: int) -> bool:
    return bool(bounding_capabilities() >> number & 1)


# /proc/self/uid_map of a process in the host's own user namespace: every uid, as itself.
_INITIAL_UID_MAP = ["0", "0", "4294967295"]


def in_user_namespace(uid_map: str | None = None) -> bool:
    """Whether this process runs in a user namespace of its own, as a container does under
    an engine with `userns-remap`: its root is an unprivileged uid of the host, and its
    capabilities hold only over what that namespace owns."""
    if uid_map is None:
        try:
            with open("/proc/self/uid_map") as handle:
                uid_map = handle.read()
        except OSError:
            return False  # a kernel without user namespaces: every process is in the host's
    return uid_map.split() != _INITIAL_UID_MAP


def protect_from_oom() -> str | None:
    """Exempt this process from the OOM killer (as root, before the drop), and verify it:
    the agent's memory hog must be what the kernel kills, never the harness that reports it.

    That needs CAP_SYS_RESOURCE in the host's user namespace, which the backend grants where
    the engine can. Without it (not in the container's set, or the container in a user
    namespace of its own, where the kernel refuses the write) this returns why the exemption
    is unavailable; with it, any failure raises PrivilegeError."""
    if not has_bounding_capability(CAP_SYS_RESOURCE):
        return (
            "the container lacks CAP_SYS_RESOURCE (the engine could not grant it), so the "
            "worker cannot be exempted from the OOM killer; a kill for memory still ends the "
            "trial as limit_exceeded"
        )
    if in_user_namespace():
        return (
            "the container runs in a user namespace of its own (the engine's userns-remap), "
            "where no capability may lower an OOM score, so the worker cannot be exempted "
            "from the OOM killer; a kill for memory still ends the trial as limit_exceeded"
        )
    try:
        set_oom_score_adj(OOM_EXEMPT)
        value = oom_score_adj()
    except (OSError, ValueError) as exc:
        raise PrivilegeError(f"could not exempt the worker from the OOM killer: {exc}") from None
    if value != OOM_EXEMPT:
        raise PrivilegeError(f"oom_score_adj is {value} after writing {OOM_EXEMPT}.")
    return None


def set_no_new_privs() -> None:
    """No exec of this process or its children may gain a privilege (setuid files, file
    capabilities, root's on exec); verified."""
    _prctl(PR_SET_NO_NEW_PRIVS, 1)
    if _prctl(PR_GET_NO_NEW_PRIVS) != 1:
        raise PrivilegeError("no_new_privs is not set after setting it.")


_CAP_VERSION_3 = 0x20080522


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    ]


def drop_all_capabilities() -> None:
    """Keep uid 0 but hold no capability at all, for good.

    What the root verifier runs is within the agent's reach (a test that imports the agent's
    code), so it gets root's files and nothing more: no capability to signal, trace or read
    another process (a process with fewer capabilities than its target cannot ptrace-access
    it, which keeps the supervisor's and init's memory and descriptors out of reach), and,
    under no_new_privs, an exec cannot give them back."""
    header = _CapHeader(_CAP_VERSION_3, 0)
    data = (_CapData * 2)()
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.capset(ctypes.byref(header), data) != 0:
        raise PrivilegeError(f"capset failed: {os.strerror(ctypes.get_errno())}")
    if effective_capabilities():
        raise PrivilegeError("capabilities remain after capset.")


def _last_capability() -> int:
    with open("/proc/sys/kernel/cap_last_cap") as handle:
        return int(handle.read())


def keep_only_capabilities(numbers: frozenset[int]) -> None:
    """Hold, for good, no capability but `numbers`: the others leave the bounding set (so no
    exec of root's gets them back) and the effective, permitted and inheritable sets.

    The bounding set is trimmed where CAP_SETPCAP is held; where it is not, no_new_privs
    (which the caller sets) keeps an exec from gaining what the permitted set lost. Verified."""
    if effective_capabilities() >> CAP_SETPCAP & 1:
        for number in range(_last_capability() + 1):
            if number not in numbers and bounding_capabilities() >> number & 1:
                _prctl(PR_CAPBSET_DROP, number)
    header = _CapHeader(_CAP_VERSION_3, 0)
    data = (_CapData * 2)()
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.capget(ctypes.byref(header), data) != 0:
        raise PrivilegeError(f"capget failed: {os.strerror(ctypes.get_errno())}")
    mask = sum(1 << n for n in numbers)
    for word in (0, 1):
        part = mask >> (32 * word) & 0xFFFFFFFF
        data[word].effective &= part
        data[word].permitted &= part
        data[word].inheritable = 0
    if libc.capset(ctypes.byref(header), data) != 0:
        raise PrivilegeError(f"capset failed: {os.strerror(ctypes.get_errno())}")
    if effective_capabilities() & ~mask:
        raise PrivilegeError("capabilities outside the kept set remain after dropping them.")


def empty_bounding_set() -> bool:
    """Drop every capability from the bounding set, where this process may (it holds
    CAP_SETPCAP): nothing this process execs, setuid-root or not, can hold one again.
    Returns whether it was done."""
    if not effective_capabilities() >> CAP_SETPCAP & 1:
        return False
    for number in range(_last_capability() + 1):
        _prctl(PR_CAPBSET_DROP, number)
    if bounding_capabilities():
        raise PrivilegeError("the bounding set is not empty after dropping it.")
    return True


def drop_capability(number: int) -> None:
    """Give up one capability (effective and permitted) for good, keeping the others."""
    header = _CapHeader(_CAP_VERSION_3, 0)
    data = (_CapData * 2)()
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.capget(ctypes.byref(header), data) != 0:
        raise PrivilegeError(f"capget failed: {os.strerror(ctypes.get_errno())}")
    word, bit = divmod(number, 32)
    data[word].effective &= ~(1 << bit) & 0xFFFFFFFF
    data[word].permitted &= ~(1 << bit) & 0xFFFFFFFF
    if libc.capset(ctypes.byref(header), data) != 0:
        raise PrivilegeError(f"capset failed: {os.strerror(ctypes.get_errno())}")
    if effective_capabilities() & (1 << number):
        raise PrivilegeError(f"capability {number} remains after capset.")
