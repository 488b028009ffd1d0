"""The Swarm backend: each trial is a one-replica service that Swarm places on a node with room.

The control plane talks to a manager to create, watch and remove services, and to the
engine of the node Swarm chose to attach to the trial's container: the channel is that
container's stdin and stdout, as on the Docker backend. The worker's JSON lines are framed
messages already, and it never waits for the end of its stdin (a service's stdin would never
end: a client's half-close is not passed on). The sandbox reaches no network, so nothing in
it can reach the control plane or anything else: the control plane comes to it.

A sandbox whose node goes down or is drained while it runs is lost: `wait` says so, and the
trial's attempt is an `infra_error`, run again on a node that is up.

With a warm pool (pool.py, `EXAMHALL_POOL_SIZE`), a trial may take a service of its own
configuration that was started ahead, placed and attached, whose worker waits for its request.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
import time
import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import docker
import docker.errors
import requests

from service.backends.base import (
    Channel,
    FoundSandbox,
    LaunchSpec,
    NodeStatus,
    ReapPolicy,
    Resources,
    SandboxError,
    SandboxExit,
)
from service.backends.docker.attach import AttachChannel
from service.backends.docker.hardening import (
    LABEL_JOB,
    LABEL_OWNER,
    LABEL_SCOPE,
    LABEL_TRIAL,
    WORKER_CAPS,
    task_caps,
)
from service.backends.pool_keeper import Config, KeepsPoolOf, PoolKeeper
from service.backends.swarm.images import ImagePublisher
from service.backends.swarm.nodes import (
    Node,
    NodeEngines,
    node_state,
    node_statuses,
    read_nodes,
)
from service.backends.swarm.pool import Placed, service_pool
from service.backends.swarm.spec import task_template, volume_names
from service.images.docker_engine import DockerImageEngine
from service.images.engine import ImageEngine
from service.owners import instance_id
from service.settings import get_settings

# The network every sandbox joins, on each node: see `_network`.
SANDBOX_NETWORK = "examhall-sandboxes"
LABEL_ROLE = "examhall.role"
# Swarm's own labels on a task's container.
TASK_LABEL = "com.docker.swarm.task.id"
# Task states after which the task will never run.
_ENDED = frozenset({"complete", "failed", "shutdown", "rejected", "orphaned", "remove"})
_POLL_S = 0.02
# How often running sandboxes' nodes are checked.
WATCH_S = 1.0
# Tries to place one trial when the node Swarm chose cannot be reached, and how long such a
# node is kept out of placements (the manager marks a lost node down within seconds).
PLACEMENTS = 3
AVOID_S = 120.0


class _Unreachable(Exception):
    def __init__(self, node_id: str, message: str) -> None:
        super().__init__(message)
        self.node_id = node_id


class _StartFailed(Exception):
    """The node made the trial's container but its engine could not start it (Docker's exit
    code 128, e.g. a network endpoint it failed to join): no code of the trial or its suite
    ran, so placing it again is the infrastructure's business, not a retry of the trial."""


@dataclass(frozen=True)
class SwarmSettings:
    # The sandbox image as the nodes pull it (from the box's registry, by digest).
    image: str
    resources: Resources = field(default_factory=Resources)
    # The swarm network of direct-credentials trials; None refuses them.
    egress_network: str | None = None
    owner: str = field(default_factory=instance_id)
    # As DockerSettings.scope: a test run reaps only what it started.
    scope: str | None = None
    # The sandbox image on this control plane's engine, which task environments build on.
    local_image: str | None = None
    # From create to a running container: a node new to an image pulls it first.
    place_timeout_s: float = 120.0
    # Services kept started ahead for each configuration trials use (pool.py); 0: none.
    pool_size: int = field(default_factory=lambda: get_settings().pool_size)
    pool_idle_s: float = field(default_factory=lambda: get_settings().pool_idle_s)


class SwarmSandbox:
    def __init__(
        self,
        backend: SwarmBackend,
        name: str,
        node: str,
        engine: docker.DockerClient,
        container_id: str,
        channel: AttachChannel,
        timings: dict[str, float],
    ) -> None:
        self.backend = backend
        self.id = name
        self.node_id = node
        self.node: str | None = backend.node_name(node)
        self.engine = engine
        self.container_id = container_id
        self._attach = channel
        self.channel: Channel = channel
        self.timings = timings
        self.lost: str | None = None
        self.engine_gone = False

    def mark_lost(self, why: str) -> None:
        """The node went; end the channel at once (a dead host's socket could hang)."""
        if self.lost is None:
            self.lost = why
            self._attach.shutdown()

    def kill(self) -> None:
        with contextlib.suppress(Exception):  # gone already, or its node is: removal follows
            self.engine.api.kill(self.container_id)

    def wait(self, timeout_s: float) -> SandboxExit:
        if self.lost is None:
            try:
                state = self.engine.api.wait(self.container_id, timeout=max(1, round(timeout_s)))
                ended = self.engine.api.inspect_container(self.container_id)["State"]
            except Exception as exc:
                self.lost = self.backend.node_trouble(self.node_id)
                if self.lost is None and not isinstance(exc, requests.ConnectionError):
                    # The engine answered, late or with an error: as on the Docker backend,
                    # the exit state is unknown, and what the worker said stands.
                    raise SandboxError(f"Could not read the container's exit state: {exc}") from exc
                # No connection at all: the node's engine is gone with its machine.
                self.backend.engines.forget(self.node_id)
                self.backend._avoid(self.node_id)
                self.engine_gone = True
                self.lost = self.lost or (
                    f"The engine of node {self.backend.node_name(self.node_id)} stopped "
                    f"answering during the trial: {exc}"
                )
            else:
                # Drained or lost just as it ended: its last words may be the shutdown's.
                self.lost = self.backend.node_trouble(self.node_id)
                if self.lost is None:
                    return SandboxExit(
                        exit_code=int(state.get("StatusCode", -1)),
                        oom_killed=bool(ended.get("OOMKilled")),
                        engine_error=ended.get("Error") or None,
                    )
        return SandboxExit(exit_code=-1, lost=self.lost)

    def remove(self) -> None:
        self.backend.forget(self)
        self._attach.close()
        # A node that is down takes its container with it, and Swarm removes what is left
        # when it is back; calls to its engine would only wait out their timeout.
        down = self.engine_gone or self.backend.is_down(self.node_id)
        self.backend.remove_sandbox(self.id, {} if down else {self.node_id: self.engine})


class SwarmBackend(KeepsPoolOf):
    name = "swarm"

    def __init__(
        self,
        settings: SwarmSettings,
        manager: docker.DockerClient,
        publisher: ImagePublisher,
        image_digest: str | None = None,
    ) -> None:
        self.settings = settings
        self.manager = manager
        # The services API, which the docker stubs leave untyped.
        self.swarm: Any = manager.api
        self.publisher = publisher
        self.engines = NodeEngines(manager)
        self.image = settings.image
        self.image_digest = image_digest
        self.owner = settings.owner
        self._watched: dict[str, SwarmSandbox] = {}
        self._nodes: dict[str, Node] = {}
        self._lock = threading.Lock()
        self._wake = threading.Event()
        # Nodes whose engine did not answer, kept out of placements for a while.
        self._avoiding: dict[str, float] = {}
        self._network_ready = False
        threading.Thread(target=self._watch, name="examhall-swarm-watch", daemon=True).start()
        self.pool: PoolKeeper[Placed] | None = None
        if settings.pool_size > 0:
            self.pool = service_pool(self, size=settings.pool_size, idle_s=settings.pool_idle_s)

    # --- starting -------------------------------------------------------------------------

    def start(self, launch: LaunchSpec) -> SwarmSandbox:
        config = self.service_config(launch)
        if self.pool is not None:
            t0 = time.monotonic()
            slot = self.pool.take(config, launch.trial_id, launch.team_id)
            if slot is not None:
                return self._watch_sandbox(slot, {"pool_take": time.monotonic() - t0})
        placed = self.place(config, config["labels"])
        return self._watch_sandbox(placed, placed.timings)

    def place(self, config: Config, labels: dict[str, str]) -> Placed:
        """A started service of `config` (a trial's, or a pool's slot), placed again when
        its node could not be reached or could not start it (no code ran in it then)."""
        unreachable: list[str] = []
        failed: list[str] = []
        for _ in range(PLACEMENTS):
            try:
                return self.launch_service(f"exh-{uuid.uuid4().hex[:20]}", config, labels)
            except _Unreachable as exc:
                # The manager has not noticed yet that the node is gone: place it again.
                unreachable.append(str(exc))
            except _StartFailed as exc:
                failed.append(str(exc))
        if failed:
            raise SandboxError(
                f"The trial's container could not be started {len(failed)} times: "
                f"{'; '.join(failed)}"
            )
        raise SandboxError(f"No swarm node Swarm chose could be reached: {'; '.join(unreachable)}")

    def service_config(self, launch: LaunchSpec) -> Config:
        """What a trial's service is made of, all but its name: a warm pool's key, and the
        inputs of its task template (`launch_service`)."""
        try:
            network = self._network(launch.egress)
            image = self.publisher.publish(launch.image) if launch.image else self.image
        except SandboxError:
            raise
        except Exception as exc:
            raise SandboxError(f"The trial's swarm service could not start: {exc}") from exc
        return {
            "image": image,
            "resources": self._resources(launch),
            "network": network,
            "cut_network": not launch.egress,
            "task_dirs": launch.image is not None,
            "labels": self._labels(launch),
        }

    def launch_service(self, name: str, config: Config, labels: dict[str, str]) -> Placed:
        """A started service `name` of `config` with `labels`, its container attached; on
        failure nothing of it is left."""
        touched: dict[str, docker.DockerClient] = {}
        t0 = time.monotonic()
        try:
            template = task_template(
                sandbox=name,
                image=config["image"],
                resources=config["resources"],
                network=config["network"],
                cut_network=config["cut_network"],
                caps=(
                    task_caps(list(WORKER_CAPS), offline=config["cut_network"])
                    if config["task_dirs"]
                    else list(WORKER_CAPS)
                ),
                labels=labels,
                task_dirs=config["task_dirs"],
                avoid=self.avoided(),
            )
            self.swarm.create_service(
                template, name=name, labels=labels, mode={"Replicated": {"Replicas": 1}}
            )
            t1 = time.monotonic()
            task_id, node = self._placed(name, t0)
            try:
                engine = self.engines.client(node)
                container_id, channel = self._attached(engine, task_id, t0)
            except (docker.errors.APIError, SandboxError, _StartFailed):
                touched[node] = engine
                raise
            except Exception as exc:  # no answer from the node's engine at all
                # The manager has not noticed yet that the node is gone (it takes a few
                # heartbeats): keep trials, and the pool's services, off it meanwhile.
                self.engines.forget(node)
                self._avoid(node)
                raise _Unreachable(node, f"{self.node_name(node)}: {exc}") from exc
            touched[node] = engine
            t2 = time.monotonic()
        except Exception as exc:
            self.remove_sandbox(name, touched)
            if isinstance(exc, (SandboxError, _Unreachable, _StartFailed)):
                raise
            raise SandboxError(f"The trial's swarm service could not start: {exc}") from exc
        timings = {"create": t1 - t0, "place": t2 - t1}
        return Placed(name, node, engine, container_id, channel, timings)

    def _watch_sandbox(self, placed: Placed, timings: dict[str, float]) -> SwarmSandbox:
        p = placed
        sandbox = SwarmSandbox(self, p.name, p.node, p.engine, p.container_id, p.channel, timings)
        with self._lock:
            self._watched[p.name] = sandbox
        self._wake.set()
        return sandbox

    def build_engine(self) -> tuple[ImageEngine, str]:
        """Environments are built here and pushed to the nodes when a trial starts in one."""
        return DockerImageEngine(self.publisher.local), self.settings.local_image or self.image

    def _avoid(self, node_id: str) -> None:
        with self._lock:
            self._avoiding[node_id] = time.monotonic() + AVOID_S

    def avoided(self) -> list[str]:
        now = time.monotonic()
        with self._lock:
            self._avoiding = {n: until for n, until in self._avoiding.items() if until > now}
            return sorted(self._avoiding)

    def _labels(self, launch: LaunchSpec) -> dict[str, str]:
        labels = {LABEL_TRIAL: launch.trial_id, LABEL_JOB: launch.job_id, LABEL_OWNER: self.owner}
        if self.settings.scope is not None:
            labels[LABEL_SCOPE] = self.settings.scope
        return labels

    def _resources(self, launch: LaunchSpec) -> Resources:
        r = self.settings.resources
        return dataclasses.replace(
            r,
            memory_bytes=launch.memory_bytes or r.memory_bytes,
            cpus=launch.cpus or r.cpus,
            workspace_bytes=launch.workspace_bytes or r.workspace_bytes,
        )

    def _network(self, egress: bool) -> str:
        """The network a trial's container joins: it must join one (`--network none` is
        refused for services). The sandboxes' network is internal, and the worker deletes its
        interface before it reads anything, so no code of the trial ever sees it; a
        direct-credentials trial gets the configured egress network instead, and keeps it."""
        if not egress:
            return self._sandbox_network()
        if self.settings.egress_network is None:
            raise SandboxError(
                "Direct-credentials trials need a network out; this swarm has none: set "
                "EXAMHALL_SWARM_EGRESS_NETWORK, or run the job with credentials: relay."
            )
        return self.settings.egress_network

    def _sandbox_network(self) -> str:
        with self._lock:
            if self._network_ready:
                return SANDBOX_NETWORK
        if not self._find_network(SANDBOX_NETWORK):
            # A bridge on each node, not an overlay: a container joins it in a third of an
            # overlay's time. Another control plane may create it at the same moment.
            with contextlib.suppress(docker.errors.APIError):
                self.swarm.create_network(
                    SANDBOX_NETWORK,
                    driver="bridge",
                    scope="swarm",
                    internal=True,
                    labels={LABEL_ROLE: "sandboxes"},
                )
            if not self._find_network(SANDBOX_NETWORK):
                raise SandboxError(f"Could not create the swarm network {SANDBOX_NETWORK}.")
        with self._lock:
            self._network_ready = True
        return SANDBOX_NETWORK

    def _find_network(self, name: str) -> bool:
        return any(
            n["Name"] == name and n.get("Scope") == "swarm"
            for n in self.swarm.networks(filters={"name": name})
        )

    def _placed(self, name: str, t0: float) -> tuple[str, str]:
        """The service's task and its node, once Swarm has placed it."""
        while True:
            tasks = self.swarm.tasks(filters={"service": name})
            for task in tasks:
                status = task.get("Status", {})
                if status.get("State") in _ENDED:
                    raise SandboxError(
                        f"Swarm could not run the trial's task: {status.get('Err') or status}"
                    )
                if task.get("NodeID"):
                    return str(task["ID"]), str(task["NodeID"])
            if time.monotonic() - t0 > self.settings.place_timeout_s:
                why = next((t["Status"].get("Err") for t in tasks if t["Status"].get("Err")), "")
                raise SandboxError(
                    f"Swarm placed the trial on no node in {self.settings.place_timeout_s:g} s"
                    f"{': ' + why if why else ''}; add nodes or lower EXAMHALL_MAX_CONTAINERS."
                )
            time.sleep(_POLL_S)

    def _attached(
        self, engine: docker.DockerClient, task_id: str, t0: float
    ) -> tuple[str, AttachChannel]:
        """The task's container on its node, attached as soon as the node has made it. The
        worker writes nothing before its request arrives, so attaching once it runs loses
        nothing."""
        while True:
            for found in engine.api.containers(
                all=True, filters={"label": f"{TASK_LABEL}={task_id}"}, quiet=True
            ):
                try:
                    sock = engine.api.attach_socket(
                        found["Id"], params={"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1}
                    )
                except docker.errors.NotFound:
                    continue  # the node replaced it (a failed first try): look again
                channel = AttachChannel(sock)
                try:
                    self._started(engine, str(found["Id"]), t0)
                except BaseException:
                    channel.close()
                    raise
                return str(found["Id"]), channel
            for task in self.swarm.tasks(filters={"id": task_id}):
                status = task.get("Status", {})
                if status.get("State") in _ENDED:
                    raise SandboxError(
                        f"The trial's task ended before it ran: {status.get('Err') or status}"
                    )
            if time.monotonic() - t0 > self.settings.place_timeout_s:
                raise SandboxError(
                    f"The trial's node made no container in {self.settings.place_timeout_s:g} s "
                    "(is the image's pull stuck? see `docker service ps`)."
                )
            time.sleep(_POLL_S)

    def _started(self, engine: docker.DockerClient, container_id: str, t0: float) -> None:
        """Return once the attached container has started. Attaching comes first so that
        nothing the worker writes is missed; a start that fails shows only here, as Docker's
        own error on a container that never ran."""
        while True:
            try:
                state = engine.api.inspect_container(container_id)["State"]
            except docker.errors.NotFound as exc:
                raise _StartFailed("its container was removed before it started") from exc
            # A failed start leaves the container `created` (or `exited`) with Docker's error.
            if state.get("Error") and not state.get("Running"):
                raise _StartFailed(str(state["Error"]))
            if state.get("Status") != "created":
                return
            if time.monotonic() - t0 > self.settings.place_timeout_s:
                raise SandboxError(
                    f"The trial's container was made but not started in "
                    f"{self.settings.place_timeout_s:g} s (see `docker service ps`)."
                )
            time.sleep(_POLL_S)

    # --- the end --------------------------------------------------------------------------

    def remove_sandbox(self, name: str, engines: dict[str, docker.DockerClient]) -> bool:
        """Remove a sandbox's service, container and volumes; never raises. Says
        whether there was anything left to remove. `engines` are the node engines known to
        hold its container."""
        with contextlib.suppress(Exception):
            for task in self.swarm.tasks(filters={"service": name}):
                node = task.get("NodeID")
                if node and node not in engines and not self.is_down(node):
                    with contextlib.suppress(Exception):
                        engines[node] = self.engines.client(node)
        for engine in engines.values():
            with contextlib.suppress(Exception):
                for c in engine.api.containers(
                    all=True, filters={"label": f"com.docker.swarm.service.name={name}"}
                ):
                    engine.api.remove_container(c["Id"], force=True, v=True)
        removed = False
        with contextlib.suppress(docker.errors.NotFound, docker.errors.APIError):
            self.swarm.remove_service(name)
            removed = True
        for engine in engines.values():
            for volume in volume_names(name, task_dirs=True).values():
                with contextlib.suppress(Exception):
                    engine.api.remove_volume(volume, force=True)
        return removed

    def forget(self, sandbox: SwarmSandbox) -> None:
        with self._lock:
            self._watched.pop(sandbox.id, None)

    # --- nodes ----------------------------------------------------------------------------

    def _watch(self) -> None:
        """While sandboxes run, check their nodes every WATCH_S; a sandbox whose node is no
        longer ready is lost."""
        while True:
            self._wake.wait()
            with self._lock:
                watched = list(self._watched.values())
            if not watched:
                self._wake.clear()
                continue
            with contextlib.suppress(Exception):  # a manager hiccup: try again next time
                nodes = {n.id: n for n in self._refresh_nodes()}  # one call for them all
                for sandbox in watched:
                    node = nodes.get(sandbox.node_id)
                    if node is None:
                        sandbox.mark_lost(_left(sandbox.node_id))
                    elif node.state != "ready":
                        sandbox.mark_lost(_unready(node.name, node.state))
            time.sleep(WATCH_S)

    def _refresh_nodes(self) -> list[Node]:
        nodes = read_nodes(self.manager)
        with self._lock:
            self._nodes = {n.id: n for n in nodes}
        return nodes

    def node_trouble(self, node_id: str) -> str | None:
        """Why a node can no longer hold a trial (drained, down, gone), or None; asked fresh."""
        try:
            node = self.swarm.inspect_node(node_id)
        except docker.errors.NotFound:
            return _left(node_id)
        except docker.errors.DockerException:
            return None  # the manager is what we cannot reach; the node may be fine
        state = node_state(node)
        if state == "ready":
            return None
        return _unready(self.node_name(node_id), state)

    def is_down(self, node_id: str) -> bool:
        with self._lock:
            node = self._nodes.get(node_id)
        return node is not None and node.state == "down"

    def node_name(self, node_id: str) -> str:
        with self._lock:
            node = self._nodes.get(node_id)
        if node is None:
            with contextlib.suppress(docker.errors.DockerException):
                node = next((n for n in self._refresh_nodes() if n.id == node_id), None)
        return node.name if node else node_id

    def nodes(self) -> list[NodeStatus]:
        try:
            nodes = self._refresh_nodes()
            ours = {s["ID"] for s in self.swarm.services(filters={"label": LABEL_TRIAL})}
            tasks = self.swarm.tasks(filters={"desired-state": "running"}) if ours else []
        except docker.errors.DockerException as exc:
            raise SandboxError(f"The swarm manager could not be asked: {exc}") from exc
        per_node: Counter[str] = Counter(
            t["NodeID"]
            for t in tasks
            if t.get("ServiceID") in ours
            and t.get("NodeID")
            and t.get("Status", {}).get("State") not in _ENDED
        )
        return node_statuses(nodes, per_node)

    def health(self) -> str:
        try:
            nodes = self._refresh_nodes()
        except Exception as exc:  # any failure is the answer, not a crash of the probe
            return f"unreachable: {type(exc).__name__}"
        if not any(n.state == "ready" for n in nodes):
            return "no swarm node is ready"
        return "ok"

    # --- reaping --------------------------------------------------------------------------

    def reap(self, policy: ReapPolicy) -> list[str]:
        labels = [LABEL_TRIAL]
        if self.settings.scope is not None:
            labels.append(f"{LABEL_SCOPE}={self.settings.scope}")
        listed_at = time.monotonic()
        services = {s["Spec"]["Name"]: s for s in self.swarm.services(filters={"label": labels})}
        if self.pool is not None:
            self.pool.prune(set(services), listed_at)
        found = [
            _Found(self._trial_of(name, s["Spec"].get("Labels")), _owner(s), name)
            for name, s in services.items()
            # A slot of this plane's pool not yet taken is kept: it waits for a trial.
            if self.pool is None or not self.pool.holds(name)
        ]
        chosen: Sequence[FoundSandbox] = policy(found)
        removed = []
        for sandbox in chosen:
            assert isinstance(sandbox, _Found)
            if self.remove_sandbox(sandbox.name, {}):
                removed.append(sandbox.trial_id)
        return removed

    def _trial_of(self, name: str, labels: dict[str, str] | None) -> str:
        """The trial a service runs: its label, or for a slot this plane's pool gave a
        trial, that trial (a service's labels are set when it starts, as the container's)."""
        taken = self.pool.trial_of(name) if self.pool is not None else None
        return taken or str((labels or {}).get(LABEL_TRIAL, ""))


def _left(node_id: str) -> str:
    return f"Swarm node {node_id} left the swarm during the trial."


def _unready(name: str, state: str) -> str:
    return f"Swarm node {name} was {state} during the trial."


def _owner(service: dict[str, Any]) -> str:
    return str((service["Spec"].get("Labels") or {}).get(LABEL_OWNER, ""))


@dataclass(frozen=True)
class _Found(FoundSandbox):
    name: str = ""
