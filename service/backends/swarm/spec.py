"""The Swarm service a trial runs as: the Docker backend's hardening, property by property.

A service on Engine 20.10 cannot be given everything a container can, so each property
below is either set on the service as the Docker backend sets it, or got another way:

| Docker backend (hardening.py)   | here                                                     |
| ------------------------------- | -------------------------------------------------------- |
| `--network none`                | refused for services: the container joins an internal    |
|                                 | network, whose interface the worker deletes first thing  |
|                                 | (EXAMHALL_CUT_NETWORK, sandbox/netcut.py, with NET_ADMIN  |
|                                 | held for that step alone): the agent sees only `lo`, as  |
|                                 | under `--network none`                                    |
| `--cap-drop ALL` + WORKER_CAPS  | CapabilityDrop / CapabilityAdd, the same lists           |
| `no-new-privileges`, seccomp    | cannot be set on a service: the worker sets both on       |
|                                 | itself first thing (EXAMHALL_SELF_CONFINE, sandbox/      |
|                                 | confine.py), from the same profile; the engine's default |
|                                 | profile still applies beneath it                          |
| `--read-only`, `--init`         | ReadOnly, Init                                            |
| `--pids-limit`, memory, CPUs    | Resources.Limits (and the same as Reservations, so Swarm |
|                                 | places a trial only on a node with room for it)          |
| tmpfs /tmp, /workspace, task    | a service's tmpfs mounts are always `noexec`; the Docker |
| dirs (rw,nosuid,nodev, sized)   | backend's are not: local tmpfs volumes with our own       |
|                                 | options instead, named per trial and removed with it      |
| /dev/mqueue masked, no /dev/shm | read-only 4 KiB tmpfs over both (the profile refuses the  |
| (`ipc_mode: none`)              | SysV and POSIX IPC calls as well)                         |
| log driver none, labels         | LogDriver none; the same labels on service and container |
| restart: never                  | replicated, 1 replica, RestartPolicy none (job mode       |
|                                 | leaves containers behind on 20.10: moby#44312, #42789)    |

Not settable and not replaced: memory-swap equal to memory (a service's swap limit is the
engine's default, twice the memory): on nodes without swap, as
docs/guides/several-boxes.md recommends, there is nothing to limit.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sandbox.confine import SELF_CONFINE_ENV
from sandbox.netcut import CUT_NETWORK_ENV
from sandbox.protocol import WORKSPACE_DIR
from service.backends.base import Resources
from service.backends.docker.hardening import LABEL_SECCOMP, TASK_DIRS
from service.backends.docker.seccomp import profile_digest

NET_ADMIN = "NET_ADMIN"
_TMPFS_OPTIONS = "nosuid,nodev"
_MASK = {"ReadOnly": True, "TmpfsOptions": {"SizeBytes": 4096, "Mode": 0o555}}
# How long Swarm waits between SIGTERM and SIGKILL on removal: a trial is over by then.
STOP_GRACE_NS = 1_000_000_000


def volume_names(sandbox: str, task_dirs: bool) -> dict[str, str]:
    """The tmpfs volumes of one sandbox, by mount point: named so `remove` can find them."""
    targets = ["/tmp", WORKSPACE_DIR, *(TASK_DIRS if task_dirs else ())]
    return {target: f"{sandbox}{target.replace('/', '-')}" for target in targets}


def _tmpfs_volume(
    name: str, target: str, size: int, mode: str, labels: dict[str, str]
) -> dict[str, Any]:
    options = f"size={size},mode={mode},{_TMPFS_OPTIONS}"
    return {
        "Type": "volume",
        "Source": name,
        "Target": target,
        "VolumeOptions": {
            "Labels": labels,
            "DriverConfig": {
                "Name": "local",
                "Options": {"type": "tmpfs", "device": "tmpfs", "o": options},
            },
        },
    }


def task_template(
    *,
    sandbox: str,
    image: str,
    resources: Resources,
    network: str,
    caps: list[str],
    labels: dict[str, str],
    task_dirs: bool,
    cut_network: bool = True,
    avoid: Sequence[str] = (),
) -> dict[str, Any]:
    """The TaskTemplate of one trial's service (Engine API 1.41)."""
    sizes = {"/tmp": resources.tmp_bytes, WORKSPACE_DIR: resources.workspace_bytes}
    mounts = [
        _tmpfs_volume(
            name,
            target,
            sizes.get(target, TASK_DIRS.get(target, 64) * 1024 * 1024),
            "1777" if target in sizes else "0755",
            labels,
        )
        for target, name in volume_names(sandbox, task_dirs).items()
    ]
    mounts += [{"Type": "tmpfs", "Target": path, **_MASK} for path in ("/dev/shm", "/dev/mqueue")]
    limits = {
        "MemoryBytes": resources.memory_bytes,
        "NanoCPUs": int(resources.cpus * 1e9),
        "Pids": resources.pids,
    }
    return {
        "ContainerSpec": {
            "Image": image,
            "Labels": {**labels, LABEL_SECCOMP: profile_digest()[:12]},
            # The worker confines itself, and leaves itself only `lo`, before reading anything.
            "Env": [f"{SELF_CONFINE_ENV}=1", *([f"{CUT_NETWORK_ENV}=1"] if cut_network else [])],
            "OpenStdin": True,
            "TTY": False,
            "Init": True,
            # A task's root is writable, as on the Docker backend (hardening.py).
            "ReadOnly": not task_dirs,
            "CapabilityDrop": ["ALL"],
            # NET_ADMIN for the worker's first step alone, which deletes eth0 and drops it.
            "CapabilityAdd": [*caps, *([NET_ADMIN] if cut_network else [])],
            "Mounts": mounts,
            "StopGracePeriod": STOP_GRACE_NS,
        },
        "Resources": {
            "Limits": limits,
            "Reservations": {k: v for k, v in limits.items() if k != "Pids"},
        },
        "RestartPolicy": {"Condition": "none", "MaxAttempts": 0},
        "Placement": {
            "Constraints": ["node.platform.os == linux", *(f"node.id != {n}" for n in avoid)]
        },
        "Networks": [{"Target": network}],
        "LogDriver": {"Name": "none"},
    }
