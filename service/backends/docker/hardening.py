"""The container a trial runs in: everything that confines it, in one place.

No network (or, for direct-credentials trials, the configured egress network), no
capabilities beyond the few the worker's start needs (all dropped before the agent runs),
examhall's own seccomp profile and no-new-privileges (applied by the engine, or by the worker
itself where a backend cannot have the engine apply them), a read-only root with size-capped
tmpfs for /tmp and the workspace, and pids, memory and CPU limits.
"""

from __future__ import annotations

from typing import Any

from docker.types import LogConfig

from sandbox.confine import SELF_CONFINE_ENV
from sandbox.protocol import WORKSPACE_DIR
from service.backends.base import Resources
from service.backends.docker.seccomp import profile_digest, profile_json

LABEL_TRIAL = "examhall.trial"
LABEL_JOB = "examhall.job"
LABEL_OWNER = "examhall.owner"
LABEL_PROBE = "examhall.probe"
LABEL_SCOPE = "examhall.scope"
LABEL_SECCOMP = "examhall.seccomp"
# On a warm pool's containers (pool.py), taken or not.
LABEL_POOL = "examhall.pool"
# What the worker's start needs as root, all dropped before the agent runs; KILL lets the
# root supervisor end a sandboxed worker that broke the channel's rules.
WORKER_CAPS = ("CHOWN", "SETUID", "SETGID", "FOWNER", "DAC_OVERRIDE", "KILL")
# Added where the engine can grant it: it lets the supervisor and the worker exempt themselves
# from the OOM killer and pin the agent's processes as its first choice.
OOM_CAP = "SYS_RESOURCE"
_TMPFS = "rw,nosuid,nodev"
# A task's verifier: tests are copied in and rewards written here, by root only, after the
# agent's processes are gone (sandbox/verifier.py); an agent can neither write nor plant.
TASK_DIRS = {"/tests": 64, "/logs": 64, "/solution": 64}  # MiB
# What a task's container holds beyond WORKER_CAPS: with them, Docker's default set, which
# Harbor's verifier has (sandbox/verifier.py keeps all but MKNOD for it). The sandboxed
# worker empties its bounding set before it becomes the agent's user, so no process of the
# agent's can hold any of them. NET_RAW only in a container without a network of its own.
TASK_CAPS = (
    "FSETID", "MKNOD", "SETFCAP", "SETPCAP", "NET_BIND_SERVICE", "SYS_CHROOT", "AUDIT_WRITE"
)  # fmt: skip
OFFLINE_TASK_CAPS = ("NET_RAW",)


def task_caps(worker_caps: list[str], *, offline: bool) -> list[str]:
    """A task container's capabilities: the worker's and those of Harbor's verifier."""
    extra = [*TASK_CAPS, *(OFFLINE_TASK_CAPS if offline else ())]
    return [*worker_caps, *(cap for cap in extra if cap not in worker_caps)]


def container_config(
    *,
    image: str,
    resources: Resources,
    network: str,
    caps: list[str],
    labels: dict[str, str],
    runtime: str | None,
    task_dirs: bool = False,
    engine_confinement: bool = True,
) -> dict[str, Any]:
    """Keyword arguments of `containers.create` for one trial's container.

    With `engine_confinement` False the engine applies no seccomp filter at all (not even its
    default one) and no no-new-privileges, and the worker applies both to itself at its start:
    the way a backend that cannot pass security options (Swarm) confines its trials, and how
    the tests prove that self-confinement holds on a plain engine."""
    # A task's container: its root is writable, as the verifier that runs as Harbor's needs
    # (apt, pip, files beside the system's); the agent, never root, writes only what the
    # image lets its user write. Its workspace and /tmp may hold what the agent compiles
    # and runs, as on any machine.
    tmpfs = f"{_TMPFS},exec" if task_dirs else _TMPFS
    if engine_confinement:
        security_opt = ["no-new-privileges", f"seccomp={profile_json()}"]
        environment: dict[str, str] = {}
    else:
        security_opt = ["seccomp=unconfined"]
        environment = {SELF_CONFINE_ENV: "1"}
    config: dict[str, Any] = {
        "image": image,
        "stdin_open": True,
        "tty": False,
        "detach": True,
        "network_mode": network,
        "cap_drop": ["ALL"],
        "cap_add": caps,
        "security_opt": security_opt,
        "environment": environment,
        "read_only": not task_dirs,
        "tmpfs": {
            "/tmp": f"{tmpfs},size={resources.tmp_bytes}",
            WORKSPACE_DIR: f"{tmpfs},size={resources.workspace_bytes}",
            # `ipc_mode: none` still mounts an mqueue filesystem here, writable by everyone:
            # an empty read-only tmpfs takes its place. (The seccomp profile refuses mq_open
            # and SysV msg/sem/shm as well.)
            "/dev/mqueue": "ro,nosuid,nodev,noexec,size=4k,mode=0555",
        },
        "pids_limit": resources.pids,
        "mem_limit": resources.memory_bytes,
        "memswap_limit": resources.memory_bytes,
        "nano_cpus": int(resources.cpus * 1e9),
        "init": True,
        # A private IPC namespace without /dev/shm. It leaves /dev/mqueue mounted (masked
        # above) and the SysV calls working (refused by the seccomp profile).
        "ipc_mode": "none",
        "privileged": False,
        # The channel is read through attach; a log copy on the host would only grow.
        "log_config": LogConfig(type="none"),
        "labels": {**labels, LABEL_SECCOMP: profile_digest()[:12]},
    }
    if task_dirs:
        for path, mib in TASK_DIRS.items():
            config["tmpfs"][path] = f"{_TMPFS},size={mib}m,mode=0755"
    if runtime:
        config["runtime"] = runtime
    return config
