"""A throwaway multi-node Docker Swarm on one Docker engine, for tests and benchmarks.

Each swarm node is a container running its own Docker engine (Debian's docker.io), all on a
private bridge network with an image registry (Debian's docker-registry). The host engine only
runs these containers: it is never put into swarm mode here, and `Cluster.teardown` removes
every container, network and volume the cluster made (found by its labels).

    cluster = Cluster.start(docker.from_env(), nodes=3, progress=print)
    try:
        ref = cluster.push(host_client, "examhall/sandbox:abc")  # registry:5000/...@sha256:...
        cluster.manager.services.create(ref, ...)
    finally:
        cluster.teardown()

Reachability: the control plane on the host reaches each node's engine at
`tcp://127.0.0.1:<port>` (node.engine_url, also the swarm node label `examhall.engine`) and
pushes to the registry at `127.0.0.1:<port>` (cluster.registry_push; the host engine trusts
127.0.0.0/8 registries over plain HTTP). The nodes pull from `registry:5000`, the registry's
alias on the private network, which every node engine is told is an insecure registry.
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import docker
import docker.errors
from docker.models.containers import Container
from docker.models.networks import Network
from docker.types import Mount
from docker.utils import parse_repository_tag

from service.cli.box import ensure_registry_image as box_registry_image
from service.images.debian_base import DEBIAN_BASE_REPO, debian_suite, resolve_base
from service.images.sandbox_image import (
    HASH_LABEL,
    BuildContext,
    build_image,
    ensure_sandbox_image,
    is_current,
)

Progress = Callable[[str], None]

NODE_REPO = "examhall/swarm-node"

# Every container, network and volume of a cluster carries LABEL_CLUSTER=<its label>, so
# teardown (and `remove`) find exactly what one cluster made and nothing else on the engine.
LABEL_CLUSTER = "examhall.swarm-cluster"
LABEL_ROLE = "examhall.swarm-role"  # "node", "registry" or "network"
# "<hostname>:<pid>" of the process that started the cluster, so `reap_orphans` can remove
# clusters whose process died without tearing down (and only those).
LABEL_OWNER = "examhall.swarm-owner"
# A swarm node label: the URL at which the host reaches the engine of that node.
ENGINE_LABEL = "examhall.engine"

ENGINE_PORT = 2375
REGISTRY_ALIAS = "registry"
REGISTRY_PORT = 5000

_IMAGES_DIR = Path(__file__).resolve().parent / "images"
_LABEL_PATTERN = re.compile(r"[a-z0-9][a-z0-9-]{0,31}")

# What a node container needs to run dockerd, in place of --privileged: on this machine the
# host engine lacks CAP_SYS_RESOURCE, and runc refuses a privileged container ("unable to apply
# caps: operation not permitted") because privileged asks for every capability. So: every
# capability but that one, no seccomp/AppArmor filter, every device, and a private cgroup
# namespace; the entrypoint makes /sys, /proc/sys and the cgroup mounts writable (the API has
# no `--security-opt systempaths=unconfined`). The inner engine then runs its containers with
# memory/pids limits as usual (cgroup v1).
NODE_RUN_OPTIONS: dict[str, Any] = {
    "cap_add": ["ALL"],
    "cap_drop": ["SYS_RESOURCE"],
    "security_opt": ["seccomp=unconfined", "apparmor=unconfined"],
    "cgroupns": "private",
    "device_cgroup_rules": ["a *:* rwm"],
}
# overlay2, on the volume mounted at /var/lib/docker (the host's ext4): works nested here and is
# what a real node would use. (vfs also works but copies every layer; fuse-overlayfs would need
# /dev/fuse and the fuse-overlayfs package in the node image.)
NODE_STORAGE_DRIVER = "overlay2"

_ENGINE_START_TIMEOUT = 90.0
_NODE_READY_TIMEOUT = 90.0
_POLL = 0.25
# The registry is on loopback: an http_proxy in the environment must not be asked for it.
_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class ClusterError(RuntimeError):
    """The test swarm could not be built or driven; the message says why and what to do."""


def _quiet(_: str) -> None:
    pass


def ensure_node_image(
    client: docker.DockerClient, progress: Progress = _quiet, *, force: bool = False
) -> str:
    """An image of a swarm node (dockerd from Debian's docker.io), built once and reused;
    `force` rebuilds it without the layer cache."""
    files = ("dockerd-entrypoint.sh",)
    return _ensure_image(client, NODE_REPO, "node.Dockerfile", files, progress, force)


def ensure_registry_image(client: docker.DockerClient, progress: Progress = _quiet) -> str:
    """The box's registry image (docker/registry/, as `examhall box build --swarm` makes it),
    on the bootstrapped Debian base: the cluster runs what a real box would."""
    base = resolve_base(client, f"{DEBIAN_BASE_REPO}:{debian_suite()}", progress)
    return box_registry_image(client, base, progress=progress)


def _ensure_image(
    client: docker.DockerClient,
    repo: str,
    dockerfile: str,
    files: tuple[str, ...],
    progress: Progress,
    force: bool,
) -> str:
    context = BuildContext(
        dockerfile=(_IMAGES_DIR / dockerfile).read_bytes(),
        files=tuple((name, (_IMAGES_DIR / name).read_bytes()) for name in files),
        executable=frozenset(name for name in files if name.endswith(".sh")),
    )
    # Nothing can be pulled here: the base is the Debian system debian_base.py bootstraps (and
    # resolve_base bootstraps it if it is missing). The tag is a hash of the recipe and the
    # base's name, as for the sandbox image, so an unchanged recipe is never rebuilt.
    base = f"{DEBIAN_BASE_REPO}:{debian_suite()}"
    digest = context.digest(base)
    ref = f"{repo}:{digest[:12]}"
    if is_current(client, ref, digest):
        if not force:
            progress(f"{ref} is up to date.")
            return ref
        superseded: str | None = client.images.get(ref).id
    else:
        superseded = None
    resolved = resolve_base(client, base, progress)
    progress(f"Building {ref} on {resolved}...")
    build_image(
        client,
        context,
        ref,
        resolved,
        labels={HASH_LABEL: digest},
        nocache=force,
        progress=progress,
        advice=(
            f"Fix the cause above (the recipe is {_IMAGES_DIR / dockerfile}; apt inside the "
            f"build must reach a Debian mirror), then run this again."
        ),
    )
    if superseded and superseded != client.images.get(ref).id:
        # The rebuild took the tag; the old image, built here too, would linger untagged.
        with contextlib.suppress(docker.errors.APIError):
            client.images.remove(superseded)
    return ref


@dataclass
class Node:
    """One swarm node: a container running a Docker engine."""

    name: str  # its hostname, node-1, node-2, ...
    container: Container
    engine_url: str  # tcp://127.0.0.1:<port>, the host's way to its engine
    address: str  # its IP on the cluster's private network (what swarm advertises)
    client: docker.DockerClient  # a client of its engine
    node_id: str = ""  # its swarm node id, once it has joined
    manager: bool = False


@dataclass
class Cluster:
    """A running test swarm. Build one with `Cluster.start`; end it with `teardown`."""

    host: docker.DockerClient  # the host engine, which runs the node and registry containers
    label: str
    network: Network
    registry: Container
    registry_push: str  # 127.0.0.1:<port>: where the host engine pushes
    node_image: str
    nodes: list[Node] = field(default_factory=list)
    registry_pull: str = f"{REGISTRY_ALIAS}:{REGISTRY_PORT}"  # where the nodes pull from
    # More arguments for every node's dockerd (e.g. another --insecure-registry), and more
    # names of a node on the private network, by node name: see `start`.
    engine_args: tuple[str, ...] = ()
    aliases: dict[str, tuple[str, ...]] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)  # seconds, by phase
    progress: Progress = _quiet

    # -- building ---------------------------------------------------------------------------

    @classmethod
    def start(
        cls,
        client: docker.DockerClient,
        nodes: int = 3,
        *,
        label: str | None = None,
        managers: int = 1,
        engine_args: Sequence[str] = (),
        aliases: Mapping[str, Sequence[str]] | None = None,
        progress: Progress = _quiet,
    ) -> Cluster:
        """Start a registry and `nodes` engines on a private network and make them a swarm:
        node-1 initialises it, nodes 2..`managers` join as managers, the rest as workers.
        `engine_args` go to every node's dockerd; `aliases` gives nodes more names on the
        private network (e.g. {"node-1": ["box"]}, for a registry a node's containers serve)."""
        if not 1 <= managers <= nodes:
            raise ValueError(f"managers must be between 1 and nodes ({nodes}), not {managers}")
        label = label or f"t{uuid.uuid4().hex[:10]}"
        if not _LABEL_PATTERN.fullmatch(label):
            raise ValueError(
                f"cluster label {label!r} must be 1-32 lowercase letters, digits or '-' "
                f"(it is part of container and network names)"
            )
        started = time.monotonic()
        timings: dict[str, float] = {}
        mark = time.monotonic()
        node_image = ensure_node_image(client, progress)
        registry_image = ensure_registry_image(client, progress)
        timings["images"] = time.monotonic() - mark

        labels = _labels(label, "network")
        network = client.networks.create(
            f"examhall-swarm-{label}", driver="bridge", labels=labels, check_duplicate=True
        )
        cluster: Cluster | None = None
        try:
            mark = time.monotonic()
            registry = _start_registry(client, network, label, registry_image)
            registry_push = f"127.0.0.1:{_host_port(registry, REGISTRY_PORT)}"
            cluster = cls(
                host=client,
                label=label,
                network=network,
                registry=registry,
                registry_push=registry_push,
                node_image=node_image,
                engine_args=tuple(engine_args),
                aliases={name: tuple(names) for name, names in (aliases or {}).items()},
                progress=progress,
            )
            progress(f"Starting {nodes} swarm nodes on {network.name}...")
            fresh = [cluster._start_node_container(i) for i in range(1, nodes + 1)]
            _wait_registry(registry_push, registry)
            cluster.nodes = [cluster._wait_engine(*started_node) for started_node in fresh]
            timings["engines"] = time.monotonic() - mark

            mark = time.monotonic()
            first = cluster.nodes[0]
            first.client.swarm.init(advertise_addr=first.address, listen_addr="0.0.0.0:2377")
            first.manager = True
            first.node_id = first.client.info()["Swarm"]["NodeID"]
            cluster._label_node(first)
            for index, node in enumerate(cluster.nodes[1:], start=2):
                cluster._join(node, as_manager=index <= managers)
            cluster._wait_ready(cluster.nodes)
            timings["swarm"] = time.monotonic() - mark
        except BaseException:
            # Nothing of a half-built cluster may outlive the failure.
            if cluster is not None:
                cluster._close_clients()
            remove(client, label)
            raise
        timings["total"] = time.monotonic() - started
        cluster.timings = timings
        progress(
            f"Swarm {label} is up: {nodes} nodes, manager {cluster.manager_url}, registry "
            f"{registry_push} ({timings['total']:.1f} s)."
        )
        return cluster

    def add_node(self, *, manager: bool = False) -> Node:
        """Start one more node and join it to the swarm (e.g. to see a fresh node pull an
        image through the registry)."""
        index = max(int(node.name.rsplit("-", 1)[1]) for node in self.nodes) + 1
        self.progress(f"Adding node-{index} to swarm {self.label}...")
        node = self._wait_engine(*self._start_node_container(index))
        self.nodes.append(node)
        self._join(node, as_manager=manager)
        self._wait_ready([node])
        return node

    def _start_node_container(self, index: int) -> tuple[str, Container]:
        name = f"node-{index}"
        endpoint = self.host.api.create_endpoint_config(aliases=list(self.aliases.get(name, ())))
        container = self.host.containers.run(
            self.node_image,
            # Arguments of the entrypoint, which passes them on to dockerd.
            command=list(self.engine_args),
            name=f"examhall-swarm-{self.label}-{name}",
            hostname=name,
            detach=True,
            labels=_labels(self.label, "node"),
            network=self.network.name,
            networking_config={self.network.name: endpoint},
            ports={f"{ENGINE_PORT}/tcp": ("127.0.0.1", None)},
            environment={
                "EXAMHALL_NODE_STORAGE_DRIVER": NODE_STORAGE_DRIVER,
                "EXAMHALL_REGISTRY": self.registry_pull,
            },
            # Labelled, so teardown finds it even if the container is already gone.
            mounts=[
                Mount(
                    "/var/lib/docker",
                    None,
                    type="volume",
                    labels=_labels(self.label, "node"),
                )
            ],
            **NODE_RUN_OPTIONS,
        )
        return name, container

    def _wait_engine(self, name: str, container: Container) -> Node:
        deadline = time.monotonic() + _ENGINE_START_TIMEOUT
        url = ""
        while True:
            container.reload()
            if container.status not in ("created", "running"):
                raise ClusterError(
                    f"swarm node {name}'s engine exited ({container.status}) before answering. "
                    f"Last lines of its log:\n{_log_tail(container)}\nIf it could not mount "
                    f"/sys or the cgroups, or dockerd could not start, the host engine may not "
                    f"grant what NODE_RUN_OPTIONS in {__file__} asks for."
                )
            # The host port is known once the container runs, not before.
            url = url or f"tcp://127.0.0.1:{_host_port(container, ENGINE_PORT)}"
            try:
                # The constructor itself asks the engine for its API version.
                client = docker.DockerClient(base_url=url, timeout=60)
            except (docker.errors.DockerException, OSError):
                if time.monotonic() > deadline:
                    raise ClusterError(
                        f"swarm node {name}'s engine did not answer at {url} within "
                        f"{_ENGINE_START_TIMEOUT:.0f} s. Last lines of its log:\n"
                        f"{_log_tail(container)}"
                    ) from None
                time.sleep(_POLL)
                continue
            address = container.attrs["NetworkSettings"]["Networks"][self.network.name]["IPAddress"]
            return Node(name, container, url, address, client)

    def _join(self, node: Node, *, as_manager: bool) -> None:
        tokens = self.manager.swarm.attrs["JoinTokens"]
        first = self.nodes[0]
        node.client.swarm.join(
            remote_addrs=[f"{first.address}:2377"],
            join_token=tokens["Manager" if as_manager else "Worker"],
            advertise_addr=node.address,
            listen_addr="0.0.0.0:2377",
        )
        node.manager = as_manager
        node.node_id = node.client.info()["Swarm"]["NodeID"]
        self._label_node(node)

    def _label_node(self, node: Node) -> None:
        swarm_node = self.manager.nodes.get(node.node_id)
        spec = swarm_node.attrs["Spec"]
        spec.setdefault("Labels", {})[ENGINE_LABEL] = node.engine_url
        swarm_node.update(spec)

    def _wait_ready(self, nodes: list[Node]) -> None:
        deadline = time.monotonic() + _NODE_READY_TIMEOUT
        waiting = {node.node_id: node.name for node in nodes}
        while waiting:
            for node_id in list(waiting):
                if self.node_state(node_id) == "ready":
                    del waiting[node_id]
            if waiting and time.monotonic() > deadline:
                raise ClusterError(
                    f"swarm nodes {sorted(waiting.values())} joined but were not ready within "
                    f"{_NODE_READY_TIMEOUT:.0f} s; look at their engines' logs "
                    f"(docker logs examhall-swarm-{self.label}-<node>)."
                )
            if waiting:
                time.sleep(_POLL)

    # -- using ------------------------------------------------------------------------------

    @property
    def manager(self) -> docker.DockerClient:
        """A client of node-1's engine, the manager that initialised the swarm."""
        return self.nodes[0].client

    @property
    def manager_url(self) -> str:
        return self.nodes[0].engine_url

    def node(self, name: str) -> Node:
        for node in self.nodes:
            if node.name == name:
                return node
        raise KeyError(f"no swarm node {name!r}; the nodes are {[n.name for n in self.nodes]}")

    def node_state(self, name_or_id: str) -> str:
        """The manager's view of a node: "ready", "down", "unknown" or "disconnected"."""
        node_id = next((n.node_id for n in self.nodes if n.name == name_or_id), name_or_id)
        state: str = self.manager.nodes.get(node_id).attrs["Status"]["State"]
        return state

    def push(self, client: docker.DockerClient, image_ref: str) -> str:
        """Push an image of the host engine `client` to the cluster's registry and return the
        reference the nodes pull it by (`registry:5000/<repo>@sha256:...`). The temporary tag
        the push needs on the host is removed again."""
        repo, tag = parse_repository_tag(image_ref)
        if repo.startswith("sha256:"):
            raise ValueError(f"push needs a repository name, not an image id ({image_ref})")
        tag = tag or "latest"
        target = f"{self.registry_push}/{repo}"
        client.images.get(image_ref).tag(target, tag)
        digest = ""
        try:
            for line in client.api.push(target, tag, stream=True, decode=True):
                if "error" in line or "errorDetail" in line:
                    raise ClusterError(
                        f"pushing {image_ref} to the cluster's registry at {self.registry_push} "
                        f"failed: {line.get('error') or line.get('errorDetail')}. Check that the "
                        f"registry container {self.registry.name} is running (docker logs it)."
                    )
                digest = (line.get("aux") or {}).get("Digest", digest)
        finally:
            client.images.remove(f"{target}:{tag}", noprune=True)
        if not digest:
            raise ClusterError(f"pushing {image_ref} reported no digest; the push did not finish")
        return f"{self.registry_pull}/{repo}@{digest}"

    def kill_node(self, name: str) -> None:
        """Kill a node's container outright (SIGKILL to its engine and every task on it), as a
        machine failing would."""
        self.node(name).container.kill()

    def drain(self, name: str) -> None:
        self._set_availability(name, "drain")

    def activate(self, name: str) -> None:
        self._set_availability(name, "active")

    def _set_availability(self, name: str, availability: str) -> None:
        swarm_node = self.manager.nodes.get(self.node(name).node_id)
        spec = swarm_node.attrs["Spec"]
        spec["Availability"] = availability
        swarm_node.update(spec)

    def memory_usage(self) -> dict[str, int]:
        """Bytes of memory each node container uses now, less its page cache (cgroup v1's
        usage counts cache, which the kernel gives back under pressure)."""
        usage: dict[str, int] = {}
        for node in self.nodes:
            stats = node.container.stats(stream=False).get("memory_stats") or {}
            cache = int((stats.get("stats") or {}).get("cache", 0))
            usage[node.name] = int(stats.get("usage", 0)) - cache
        return usage

    # -- ending -----------------------------------------------------------------------------

    def teardown(self) -> None:
        """Remove every container, network and volume of this cluster. The swarm goes with its
        nodes; the host engine's own swarm state is never touched."""
        self._close_clients()
        remove(self.host, self.label)

    def _close_clients(self) -> None:
        for node in self.nodes:
            node.client.close()

    def __enter__(self) -> Cluster:
        return self

    def __exit__(self, *_: object) -> None:
        self.teardown()


def push_sandbox_image(
    cluster: Cluster, client: docker.DockerClient, progress: Progress = _quiet
) -> str:
    """Build (or reuse) the sandbox image on the host engine `client`, push it to the cluster's
    registry and return the reference the nodes pull it by."""
    return cluster.push(client, ensure_sandbox_image(client, progress=progress))


def remove(client: docker.DockerClient, label: str) -> None:
    """Remove every container, network and volume labelled as cluster `label`'s."""
    selector = {"label": f"{LABEL_CLUSTER}={label}"}
    for container in client.containers.list(all=True, sparse=True, filters=selector):
        # v=True: the anonymous /var/lib/docker volume goes with its node.
        with contextlib.suppress(docker.errors.NotFound):
            container.remove(force=True, v=True)
    for network in client.networks.list(filters=selector):
        with contextlib.suppress(docker.errors.NotFound):
            network.remove()
    for volume in client.volumes.list(filters=selector):
        with contextlib.suppress(docker.errors.NotFound):
            volume.remove(force=True)


def reap_orphans(client: docker.DockerClient) -> list[str]:
    """Remove the clusters that a process on this host started and did not tear down because
    it died (its pid is gone); return their labels. Other processes' clusters are left alone."""
    prefix = f"{socket.gethostname()}:"
    orphans: set[str] = set()
    for container in client.containers.list(
        all=True, sparse=True, filters={"label": LABEL_CLUSTER}
    ):
        labels = container.attrs.get("Labels") or {}
        owner = labels.get(LABEL_OWNER, "")
        pid = owner[len(prefix) :]
        if owner.startswith(prefix) and pid.isdigit() and not _pid_alive(int(pid)):
            orphans.add(labels[LABEL_CLUSTER])
    for label in sorted(orphans):
        remove(client, label)
    return sorted(orphans)


def _labels(label: str, role: str) -> dict[str, str]:
    return {
        LABEL_CLUSTER: label,
        LABEL_ROLE: role,
        LABEL_OWNER: f"{socket.gethostname()}:{os.getpid()}",
    }


def _pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _start_registry(
    client: docker.DockerClient, network: Network, label: str, image: str
) -> Container:
    endpoint = client.api.create_endpoint_config(aliases=[REGISTRY_ALIAS])
    container: Container = client.containers.run(
        image,
        name=f"examhall-swarm-{label}-registry",
        hostname=REGISTRY_ALIAS,
        detach=True,
        labels=_labels(label, "registry"),
        network=network.name,
        networking_config={network.name: endpoint},
        # The host engine pushes here; 127.0.0.1 keeps the registry off every other interface.
        ports={f"{REGISTRY_PORT}/tcp": ("127.0.0.1", None)},
    )
    return container


def _host_port(container: Container, port: int) -> int:
    container.reload()
    bindings = (container.attrs["NetworkSettings"]["Ports"] or {}).get(f"{port}/tcp") or []
    if not bindings:
        raise ClusterError(
            f"{container.name} has no host port for {port}/tcp (status {container.status}). "
            f"Last lines of its log:\n{_log_tail(container)}"
        )
    return int(bindings[0]["HostPort"])


def _wait_registry(address: str, container: Container, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with _NO_PROXY.open(f"http://{address}/v2/", timeout=5) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        if time.monotonic() > deadline:
            raise ClusterError(
                f"the cluster's registry did not answer at http://{address}/v2/ within "
                f"{timeout:.0f} s. Last lines of its log:\n{_log_tail(container)}"
            )
        time.sleep(_POLL)


def _log_tail(container: Container, lines: int = 20) -> str:
    try:
        text = container.logs(tail=lines).decode(errors="replace").rstrip()
    except docker.errors.DockerException as exc:
        return f"    (no log: {exc})"
    return "\n".join(f"    {line}" for line in text.splitlines()) or "    (empty)"
