"""examhall's seccomp profile: its shape, read without Docker (the probes test it for real)."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from sandbox.seccomp_filter import profile_text
from service.backends.docker.seccomp import profile_json
from service.images.sandbox_image import load_context

# What no trial may call, whatever the arguments (issue 11 section 3).
NEVER = {
    "io_uring_setup", "io_uring_enter", "io_uring_register",
    "add_key", "request_key", "keyctl",
    "userfaultfd", "perf_event_open", "bpf",
    "mount", "umount2", "fsopen", "fsmount", "move_mount", "open_tree", "pivot_root",
    "unshare", "setns", "kexec_load", "kexec_file_load",
    "msgget", "semget", "shmget", "mq_open", "ipc", "socketcall",
}  # fmt: skip


def _profile() -> dict[str, Any]:
    profile: dict[str, Any] = json.loads(profile_json())
    return profile


def test_the_profile_denies_by_default_on_native_architectures_only() -> None:
    profile = _profile()
    assert profile["defaultAction"] == "SCMP_ACT_ERRNO"
    assert all(not arch["subArchitectures"] for arch in profile["archMap"])


def test_nothing_an_agent_never_needs_is_allowed_anywhere() -> None:
    allowed = {
        name
        for rule in _profile()["syscalls"]
        if rule["action"] == "SCMP_ACT_ALLOW"
        for name in rule["names"]
    }
    assert not NEVER & allowed
    # The worker's start needs these.
    assert {"setresuid", "setresgid", "setgroups", "prctl", "chown", "openat2"} <= allowed


def test_sockets_are_allowed_only_for_the_four_families_tools_use() -> None:
    rules = [r for r in _profile()["syscalls"] if "socket" in r["names"]]
    assert all(r["action"] == "SCMP_ACT_ALLOW" and r["names"] == ["socket"] for r in rules)
    families = sorted(arg["value"] for r in rules for arg in r["args"])
    assert families == [1, 2, 10, 16]  # AF_UNIX, AF_INET, AF_INET6, AF_NETLINK


def test_the_sandbox_image_carries_the_profile_and_its_hash_covers_it() -> None:
    """The worker confines itself from the profile in the image (sandbox/confine.py)."""
    context = load_context()
    files = dict(context.files)
    assert files["sandbox/seccomp.json"] == profile_text().encode()
    assert {"sandbox/syscalls/x86_64.py", "sandbox/syscalls/aarch64.py"} <= set(files)
    changed = dataclasses.replace(
        context,
        files=tuple(
            (name, data + b" " if name == "sandbox/seccomp.json" else data)
            for name, data in context.files
        ),
    )
    assert changed.digest("base") != context.digest("base")
