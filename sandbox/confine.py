"""The worker confining itself: no_new_privs and examhall's seccomp filter, installed by the
worker's first process when the backend asks (EXAMHALL_SELF_CONFINE=1).

The Docker backend has the engine apply both (`no-new-privileges`, `seccomp=<profile>`); a
Swarm service on Docker 20.10 can be given neither, so there the backend starts the worker
with the variable set and the engine's seccomp off, and the worker applies the same profile
to itself before it reads anything from the control plane, and so before any suite or agent
code exists in the container. Every process of the trial descends from it and inherits both.
A filter that cannot be installed ends the trial: the worker never runs unconfined when asked
to confine itself.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Mapping

SELF_CONFINE_ENV = "EXAMHALL_SELF_CONFINE"

_PR_SET_NO_NEW_PRIVS = 38
_SECCOMP_SET_MODE_FILTER = 1
# Every thread of the process gets the filter (the worker has none yet, but a stray thread
# left unfiltered would be a way out).
_SECCOMP_FILTER_FLAG_TSYNC = 1


class ConfinementError(RuntimeError):
    pass


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def requested(environ: Mapping[str, str]) -> bool:
    """Whether the backend asked the worker to confine itself."""
    return environ.get(SELF_CONFINE_ENV) == "1"


def confine_self() -> int:
    """Set no_new_privs and install examhall's seccomp filter on every thread of this process;
    returns the program's length in instructions. ConfinementError if any of it fails."""
    # Here, not at the top: the compiler and its syscall tables are a good part of the
    # worker's start, and only a backend that cannot confine the container needs them.
    from sandbox.seccomp_filter import ARCHES, ProfileError, compile_profile, load_profile

    machine = os.uname().machine
    if machine not in ARCHES:
        raise ConfinementError(
            f"this machine is {machine}; examhall's seccomp filter is built for "
            f"{' and '.join(ARCHES)} only, and the worker does not run unconfined."
        )
    try:
        program = compile_profile(load_profile(), machine)
    except ProfileError as exc:
        raise ConfinementError(f"examhall's seccomp profile does not compile: {exc}") from None
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise ConfinementError(
            f"prctl(PR_SET_NO_NEW_PRIVS) failed: {os.strerror(ctypes.get_errno())}."
        )
    code = ctypes.create_string_buffer(program.pack())
    fprog = _SockFprog(len(program.instructions), ctypes.addressof(code))
    tid = libc.syscall(
        ctypes.c_long(program.arch.syscalls["seccomp"]),
        ctypes.c_long(_SECCOMP_SET_MODE_FILTER),
        ctypes.c_long(_SECCOMP_FILTER_FLAG_TSYNC),
        ctypes.byref(fprog),
    )
    if tid != 0:
        why = (
            os.strerror(ctypes.get_errno())
            if tid < 0
            else f"thread {tid} could not be synchronised"
        )
        raise ConfinementError(
            f"seccomp(SECCOMP_SET_MODE_FILTER) failed: {why}. The kernel must support seccomp "
            "filters (CONFIG_SECCOMP_FILTER), and a filter already in force must allow seccomp."
        )
    status = _status()
    if status.get("NoNewPrivs") != "1" or status.get("Seccomp") != "2":
        raise ConfinementError(
            f"the filter was installed but /proc/self/status shows NoNewPrivs "
            f"{status.get('NoNewPrivs')} and Seccomp {status.get('Seccomp')}, not 1 and 2."
        )
    return len(program.instructions)


def _status() -> dict[str, str]:
    with open("/proc/self/status") as status:
        return {
            key: value.strip()
            for key, _, value in (line.partition(":") for line in status)
            if key in ("NoNewPrivs", "Seccomp")
        }
