"""examhall's seccomp profile for trial containers: sandbox/seccomp.json.

The profile is an allow-list (anything not named fails with EPERM) written on the
structure of Docker's default profile, less what an agent never needs: io_uring, socket
families other than AF_UNIX/INET/INET6/NETLINK (so no AF_VSOCK), the kernel keyring,
userfaultfd, perf_event_open and bpf, the mount family, unshare/setns and namespace flags
on clone, kexec and modules, and SysV/POSIX IPC. Its architectures carry no 32-bit
sub-architecture: the compat syscall ABI (i386, x32) is not reachable from a trial at all.
ptrace stays allowed; the profile's own comments say why.

The profile is package data of `sandbox` (found with importlib.resources), so an installed
control plane has it as well as a checkout does, and the sandbox image carries it for a worker
that applies it to itself (sandbox/confine.py) where the engine cannot.
"""

from __future__ import annotations

import functools
import hashlib
import json

from sandbox.seccomp_filter import PROFILE_NAME, profile_text


class SeccompProfileError(RuntimeError):
    pass


@functools.cache
def profile_json() -> str:
    """The profile as compact JSON, the form Docker takes in `security_opt` `seccomp=...`."""
    try:
        profile = json.loads(profile_text())
    except (OSError, ValueError) as exc:
        raise SeccompProfileError(
            f"examhall's seccomp profile (sandbox/{PROFILE_NAME}) cannot be read: {exc}. "
            "Reinstall examhall from a complete checkout; trials never run without it."
        ) from None
    # A profile that allows by default would deny only what it lists: refuse to run with one.
    if profile.get("defaultAction") != "SCMP_ACT_ERRNO":
        raise SeccompProfileError(
            f"sandbox/{PROFILE_NAME} must deny by default (defaultAction SCMP_ACT_ERRNO)."
        )
    return json.dumps(profile, separators=(",", ":"))


def profile_digest() -> str:
    """sha256 of the profile in force, recorded on every container's labels."""
    return hashlib.sha256(profile_json().encode()).hexdigest()
