"""The Docker backend: one fresh, hardened container per trial.

The container gets no network, no capabilities beyond the few the worker's start needs, a
read-only root, size-capped tmpfs for /tmp and /workspace, and pids/memory/CPU limits. The
control plane talks to the worker over the container's attached stdin/stdout, kills the
container at the wall-clock deadline, and removes it in every case.
"""

from __future__ import annotations

import contextlib
import os
import socket
import struct
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import docker
import docker.errors
from docker.types import LogConfig

from sandbox.protocol import WORKSPACE_DIR, WorkerMessage, encode
from sandbox.relay import ModelCallMessage, ModelReplyMessage, ReplyError
from service.backends.seccomp import profile_digest, profile_json
from service.settings import get_settings
from service.wire import ChannelError, parse_worker_line

LABEL_TRIAL = "examhall.trial"
LABEL_JOB = "examhall.job"
LABEL_OWNER = "examhall.owner"
LABEL_PROBE = "examhall.probe"
LABEL_SCOPE = "examhall.scope"
LABEL_SECCOMP = "examhall.seccomp"
# What the worker's start needs as root, all dropped before the agent runs; KILL lets the
# root supervisor end a sandboxed worker that broke the channel's rules.
WORKER_CAPS = ["CHOWN", "SETUID", "SETGID", "FOWNER", "DAC_OVERRIDE", "KILL"]
# Added where the engine can grant it: it lets the supervisor and the worker exempt themselves
# from the OOM killer and pin the agent's processes as its first choice.
OOM_CAP = "SYS_RESOURCE"
STDERR_TAIL_BYTES = 64 * 1024
MAX_STDOUT_LINE = 64 * 1024 * 1024


def instance_id() -> str:
    """Names this control-plane process on container labels."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def owner_gone(owner: str) -> bool:
    """Whether the process named by an owner label is known to be dead: it ran on this host
    and its pid is gone. Owners on other hosts are never presumed dead."""
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


@dataclass(frozen=True)
class SandboxLimits:
    memory_bytes: int = 1024 * 1024 * 1024
    cpus: float = 1.0
    pids: int = 256
    workspace_bytes: int = 256 * 1024 * 1024
    tmp_bytes: int = 64 * 1024 * 1024


@dataclass(frozen=True)
class DockerSettings:
    image: str
    limits: SandboxLimits = field(default_factory=SandboxLimits)
    # e.g. "runsc" for gVisor; None is the engine's default runtime.
    runtime: str | None = None
    network: str = "none"
    # For direct-credentials trials, which call their provider themselves.
    direct_network: str = field(default_factory=lambda: get_settings().direct_network)
    owner: str = field(default_factory=instance_id)
    # When set, containers carry it as a label and the reaper looks at no other container:
    # a test run gives itself a scope of its own, so that on an engine shared with live
    # control planes (or other test runs) it can only ever remove what it started.
    scope: str | None = None


@dataclass
class ContainerRun:
    """What happened to one container, as seen from outside it."""

    container_id: str | None = None
    exit_code: int | None = None
    timed_out: bool = False
    oom_killed: bool = False
    infra_error: str | None = None
    channel_error: str | None = None
    stderr_tail: str = ""
    started_at: float = 0.0
    ended_at: float = 0.0
    timings: dict[str, float] = field(default_factory=dict)


class _Demux:
    """Splits Docker's multiplexed attach stream into stdout lines and a stderr tail."""

    def __init__(self, on_line: Callable[[bytes], None]) -> None:
        self._on_line = on_line
        self._buffer = b""
        self._stdout = bytearray()
        self.stderr = bytearray()

    def feed(self, data: bytes) -> None:
        self._buffer += data
        while len(self._buffer) >= 8:
            stream, size = struct.unpack(">BxxxL", self._buffer[:8])
            if len(self._buffer) < 8 + size:
                return
            payload = self._buffer[8 : 8 + size]
            self._buffer = self._buffer[8 + size :]
            if stream == 1:
                self._stdout_data(payload)
            else:
                self.stderr += payload
                del self.stderr[:-STDERR_TAIL_BYTES]

    def _stdout_data(self, payload: bytes) -> None:
        self._stdout += payload
        while (end := self._stdout.find(b"\n")) >= 0:
            line = bytes(self._stdout[:end])
            del self._stdout[: end + 1]
            if line.strip():
                self._on_line(line)
        if len(self._stdout) > MAX_STDOUT_LINE:
            raise ChannelError("The worker sent a line longer than the channel allows.")


class DockerBackend:
    def __init__(self, settings: DockerSettings, client: docker.DockerClient | None = None):
        self.settings = settings
        self.client = client or docker.from_env()
        # Running trials and their containers (None until created).
        self._running: dict[str, Any] = {}
        self._lock = threading.Lock()
        self._caps: list[str] | None = None

    def worker_caps(self) -> list[str]:
        """WORKER_CAPS, with OOM_CAP when this engine can grant it: an engine that runs in a
        container of its own may lack it (as on the machines examhall is tested on)."""
        with self._lock:
            if self._caps is None:
                self._caps = WORKER_CAPS + ([OOM_CAP] if self._grants(OOM_CAP) else [])
            return self._caps

    def _grants(self, capability: str) -> bool:
        try:
            self.client.containers.run(
                self.settings.image,
                entrypoint=["true"],
                cap_drop=["ALL"],
                cap_add=[capability],
                network_mode="none",
                labels={LABEL_OWNER: self.settings.owner, LABEL_PROBE: capability},
                log_config=LogConfig(type="none"),
                remove=True,
            )
            return True
        except docker.errors.APIError:
            # The engine refused the capability; remove what it left, if anything.
            for container in self.client.containers.list(
                all=True, filters={"label": f"{LABEL_PROBE}={capability}"}, ignore_removed=True
            ):
                if container.labels.get(LABEL_OWNER) == self.settings.owner:
                    self._remove(container)
            return False

    def container_config(self, trial_id: str, job_id: str) -> dict[str, Any]:
        limits = self.settings.limits
        tmpfs_opts = "rw,nosuid,nodev"
        config: dict[str, Any] = {
            "image": self.settings.image,
            "stdin_open": True,
            "tty": False,
            "detach": True,
            "network_mode": self.settings.network,
            "cap_drop": ["ALL"],
            "cap_add": self.worker_caps(),
            "security_opt": ["no-new-privileges", f"seccomp={profile_json()}"],
            "read_only": True,
            "tmpfs": {
                "/tmp": f"{tmpfs_opts},size={limits.tmp_bytes}",
                WORKSPACE_DIR: f"{tmpfs_opts},size={limits.workspace_bytes}",
                # `ipc_mode: none` still mounts an mqueue filesystem here, writable by
                # everyone: an empty read-only tmpfs takes its place. (The seccomp profile
                # refuses mq_open and SysV msg/sem/shm as well.)
                "/dev/mqueue": "ro,nosuid,nodev,noexec,size=4k,mode=0555",
            },
            "pids_limit": limits.pids,
            "mem_limit": limits.memory_bytes,
            "memswap_limit": limits.memory_bytes,
            "nano_cpus": int(limits.cpus * 1e9),
            "init": True,
            # A private IPC namespace without /dev/shm. It leaves /dev/mqueue mounted (masked
            # above) and the SysV calls working (refused by the seccomp profile).
            "ipc_mode": "none",
            "privileged": False,
            # The channel is read through attach; a log copy on the host would only grow.
            "log_config": LogConfig(type="none"),
            "labels": {
                LABEL_TRIAL: trial_id,
                LABEL_JOB: job_id,
                LABEL_OWNER: self.settings.owner,
                LABEL_SECCOMP: profile_digest()[:12],
            },
        }
        if self.settings.scope is not None:
            config["labels"][LABEL_SCOPE] = self.settings.scope
        if self.settings.runtime:
            config["runtime"] = self.settings.runtime
        return config

    def run(
        self,
        *,
        trial_id: str,
        job_id: str,
        request: bytes,
        deadline_s: float,
        on_message: Callable[[WorkerMessage], None],
        on_model_call: Callable[[ModelCallMessage], ModelReplyMessage] | None = None,
        egress: bool = False,
    ) -> ContainerRun:
        """Run one worker to the end (or the deadline). Never raises for container faults;
        they come back as `infra_error`, `channel_error` or the exit state."""
        run = ContainerRun()
        container = None
        with self._lock:
            self._running[trial_id] = None
        try:
            t0 = time.monotonic()
            try:
                config = self.container_config(trial_id, job_id)
                if egress:
                    config["network_mode"] = self.settings.direct_network
                container = self.client.containers.create(**config)
                run.container_id = str(container.id)
                with self._lock:
                    self._running[trial_id] = container
                sock = self.client.api.attach_socket(
                    run.container_id, params={"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1}
                )
                run.timings["create"] = time.monotonic() - t0
                container.start()
            except docker.errors.DockerException as exc:
                run.infra_error = f"The trial's container could not start: {exc}"
                return run
            run.started_at = time.monotonic()
            run.timings["start"] = run.started_at - t0 - run.timings["create"]
            self._converse(container, sock, request, deadline_s, on_message, on_model_call, run)
            return run
        finally:
            t1 = time.monotonic()
            if container is not None:
                self._remove(container)
            run.timings["teardown"] = time.monotonic() - t1
            run.ended_at = time.monotonic()
            with self._lock:
                self._running.pop(trial_id, None)

    def _converse(
        self,
        container: Any,
        sock: Any,
        request: bytes,
        deadline_s: float,
        on_message: Callable[[WorkerMessage], None],
        on_model_call: Callable[[ModelCallMessage], ModelReplyMessage] | None,
        run: ContainerRun,
    ) -> None:
        raw: socket.socket = sock._sock
        # The client's read timeout would end the channel after a quiet minute (a long
        # tool call) and turn the trial into an infra_error; the deadline below bounds it.
        raw.settimeout(None)
        errors: list[str] = []

        def on_line(line: bytes) -> None:
            try:
                message = parse_worker_line(line)
            except ChannelError as exc:
                errors.append(str(exc))
                return
            if isinstance(message, ModelCallMessage):
                # Answered on this thread: the worker waits for the reply anyway.
                reply = (
                    on_model_call(message)
                    if on_model_call is not None
                    else ModelReplyMessage(
                        id=message.id,
                        error=ReplyError("provider_error", "This run has no model gateway."),
                    )
                )
                try:
                    raw.sendall(encode(reply))
                except OSError as exc:
                    errors.append(f"Could not send a model reply: {exc}")
                return
            on_message(message)

        demux = _Demux(on_line)

        def reader() -> None:
            try:
                while chunk := sock.read(65536):
                    demux.feed(chunk)
            except (OSError, ValueError) as exc:
                errors.append(f"The channel broke: {exc}")

        thread = threading.Thread(target=reader, name="examhall-channel", daemon=True)
        thread.start()
        try:
            raw.sendall(request)
        except OSError as exc:
            errors.append(f"Could not send the run request: {exc}")
        thread.join(timeout=max(0.0, deadline_s - (time.monotonic() - run.started_at)))
        if thread.is_alive():
            run.timed_out = True
            self._kill(container)
            thread.join(timeout=10)
        with contextlib.suppress(OSError):
            raw.close()
        try:
            state = container.wait(timeout=30)
            run.exit_code = int(state.get("StatusCode", -1))
            container.reload()
            run.oom_killed = bool(container.attrs["State"].get("OOMKilled"))
        except Exception as exc:  # the daemon may have lost the container; record, go on
            errors.append(f"Could not read the container's exit state: {exc}")
        run.stderr_tail = demux.stderr.decode(errors="replace")
        run.channel_error = "; ".join(errors) or None

    def _kill(self, container: Any) -> None:
        # Already gone is fine: removal is what matters.
        with contextlib.suppress(docker.errors.DockerException):
            container.kill()

    def _remove(self, container: Any) -> None:
        for _ in range(3):
            try:
                container.remove(force=True)
                return
            except docker.errors.NotFound:
                return
            except docker.errors.APIError:
                time.sleep(0.5)

    def running_trials(self) -> set[str]:
        with self._lock:
            return set(self._running)

    def stop_all(self) -> None:
        """Kill every running trial's container; their runs return at once."""
        self.stop(self.running_trials())

    def stop(self, trial_ids: set[str]) -> None:
        """Kill these trials' containers; their runs return at once and remove them."""
        with self._lock:
            containers = [c for t, c in self._running.items() if t in trial_ids and c is not None]
        for container in containers:
            self._kill(container)

    def reap_orphans(self) -> list[str]:
        """Remove the containers whose owning process on this host has died."""
        return self.reap(
            keep=lambda _trial: False,
            only=lambda container: owner_gone(container.labels.get(LABEL_OWNER, "")),
        )

    def reap(
        self,
        keep: Callable[[str], bool] | None = None,
        only: Callable[[Any], bool] | None = None,
    ) -> list[str]:
        """Remove every examhall container (of this backend's scope, when it has one) whose
        trial is neither running here nor kept by `keep` (the store's view of running
        trials); returns the removed trial ids."""
        labels = [LABEL_TRIAL]
        if self.settings.scope is not None:
            labels.append(f"{LABEL_SCOPE}={self.settings.scope}")
        containers = self.client.containers.list(
            all=True, filters={"label": labels}, ignore_removed=True
        )
        # Read after listing: a trial that started in between is running by now, and its
        # new container must not be taken for an orphan.
        running = self.running_trials()
        removed = []
        for container in containers:
            trial = container.labels.get(LABEL_TRIAL, "")
            if trial in running or (keep is not None and keep(trial)):
                continue
            if only is not None and not only(container):
                continue
            self._remove(container)
            removed.append(trial)
        return removed
