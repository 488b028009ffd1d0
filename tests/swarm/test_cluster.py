"""The test swarm is a real one: nodes join, tasks spread over them and talk over an overlay
network, images reach every node (and a node that joins later) through the registry, and nodes
can be drained and killed."""

from __future__ import annotations

import contextlib
import itertools
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import docker
import docker.errors
import pytest
from docker.models.containers import Container
from docker.models.networks import Network
from docker.models.services import Service
from docker.types import EndpointSpec, ServiceMode

from tests.swarm.cluster import ENGINE_LABEL, LABEL_CLUSTER, NODE_STORAGE_DRIVER, Cluster
from tests.swarm.conftest import host_swarm_state

pytestmark = pytest.mark.swarm

# A one-line TCP server: answers every connection with its host's name (the swarm node's, by
# the hostname template below), so a client can tell which node it reached.
ECHO_SERVER = (
    "import os, socket\n"
    "server = socket.create_server(('0.0.0.0', 8080))\n"
    "while True:\n"
    "    conn, _ = server.accept()\n"
    "    conn.sendall(os.uname().nodename.encode())\n"
    "    conn.close()\n"
)
SLEEP = ["python3", "-c", "import time; time.sleep(3600)"]
TASK_TIMEOUT = 120.0

Tasks = list[dict[str, Any]]


@pytest.fixture
def make_service(swarm_cluster: Cluster) -> Iterator[Callable[..., Service]]:
    """Create services on the manager (names made unique); all are removed after the test."""
    made: list[Service] = []

    def make(image: str, **kwargs: Any) -> Service:
        name = f"{kwargs.pop('name', 'svc')}-{uuid.uuid4().hex[:6]}"
        service = swarm_cluster.manager.services.create(image, name=name, **kwargs)
        made.append(service)
        return service

    yield make
    for service in made:
        # NotFound: removed already, with its network (see overlay_network).
        with contextlib.suppress(docker.errors.NotFound):
            service.remove()


def running_tasks(service: Service) -> Tasks:
    return [t for t in service.tasks() if t["Status"]["State"] == "running"]


def wait_for(
    service: Service, done: Callable[[Tasks], bool], what: str, timeout: float = TASK_TIMEOUT
) -> Tasks:
    """Poll the service's running tasks until `done` holds; fail saying what never happened."""
    deadline = time.monotonic() + timeout
    while True:
        tasks = running_tasks(service)
        if done(tasks):
            return tasks
        if time.monotonic() > deadline:
            states = [
                (t.get("NodeID", "")[:8], t["Status"]["State"], t["Status"].get("Err"))
                for t in service.tasks()
            ]
            raise AssertionError(f"{what}: not within {timeout:.0f} s; tasks: {states}")
        time.sleep(0.5)


def node_name(cluster: Cluster, task: dict[str, Any]) -> str:
    return next(node.name for node in cluster.nodes if node.node_id == task["NodeID"])


def node_names(cluster: Cluster, tasks: Tasks) -> list[str]:
    return sorted(node_name(cluster, task) for task in tasks)


def task_container(cluster: Cluster, task: dict[str, Any]) -> Container:
    """A task's container, through the engine of its node (as the backend will attach)."""
    node = next(n for n in cluster.nodes if n.node_id == task["NodeID"])
    return node.client.containers.get(task["Status"]["ContainerStatus"]["ContainerID"])


def overlay_address(task: dict[str, Any]) -> str:
    address: str = task["NetworksAttachments"][0]["Addresses"][0]
    return address.split("/")[0]


def test_nodes_form_a_swarm_and_the_host_engine_is_untouched(
    swarm_cluster: Cluster,
    docker_client: docker.DockerClient,
    host_swarm_before: dict[str, Any],
) -> None:
    swarm_nodes = {n.id: n.attrs for n in swarm_cluster.manager.nodes.list()}
    assert len(swarm_nodes) >= 3
    for node in swarm_cluster.nodes[:3]:
        attrs = swarm_nodes[node.node_id]
        assert attrs["Status"]["State"] == "ready"
        assert attrs["Spec"]["Role"] == ("manager" if node.name == "node-1" else "worker")
        # The label the backend reads to reach a task's node: it names that very engine.
        assert attrs["Spec"]["Labels"][ENGINE_LABEL] == node.engine_url
        url = attrs["Spec"]["Labels"][ENGINE_LABEL]
        with contextlib.closing(docker.DockerClient(base_url=url)) as engine:
            info = engine.info()
        assert info["Swarm"]["NodeID"] == node.node_id
        assert info["Driver"] == NODE_STORAGE_DRIVER
        assert node.engine_url.startswith("tcp://127.0.0.1:")
    assert swarm_cluster.manager_url == swarm_cluster.nodes[0].engine_url
    assert swarm_cluster.registry_push.startswith("127.0.0.1:")

    # Each node's engine state is on a volume labelled as the cluster's, so teardown finds it.
    selector = {"label": f"{LABEL_CLUSTER}={swarm_cluster.label}"}
    assert len(docker_client.volumes.list(filters=selector)) == len(swarm_cluster.nodes)
    assert host_swarm_state(docker_client) == host_swarm_before


@pytest.fixture
def overlay_network(swarm_cluster: Cluster) -> Iterator[Network]:
    """An attachable, internal overlay network on the swarm, removed after the test."""
    network = swarm_cluster.manager.networks.create(
        f"overlay-{uuid.uuid4().hex[:6]}", driver="overlay", attachable=True, internal=True
    )
    yield network
    # The manager refuses to remove a network that a service or a task still uses.
    for service in swarm_cluster.manager.services.list():
        template = service.attrs["Spec"]["TaskTemplate"]
        if any(n.get("Target") == network.id for n in template.get("Networks") or []):
            service.remove()
    deadline = time.monotonic() + 60
    while True:
        try:
            network.remove()
            return
        except docker.errors.APIError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def test_replicas_spread_over_the_nodes_and_reach_each_other_over_an_overlay(
    swarm_cluster: Cluster,
    swarm_sandbox_image: str,
    make_service: Callable[..., Service],
    overlay_network: Network,
) -> None:
    service = make_service(
        swarm_sandbox_image,
        name="echo",
        command=["python3", "-c", ECHO_SERVER],
        networks=[overlay_network.name],
        mode=ServiceMode("replicated", replicas=3),
        maxreplicas=1,
        hostname="{{.Node.Hostname}}",
        # DNS round robin, not a virtual IP: the VIP is served by IPVS, which this kernel lacks
        # (CONFIG_IP_VS is unset), so a VIP would accept no connection here.
        endpoint_spec=EndpointSpec(mode="dnsrr"),
    )
    tasks = wait_for(service, lambda ts: len(ts) == 3, "3 running tasks")
    assert node_names(swarm_cluster, tasks) == ["node-1", "node-2", "node-3"]

    for client_task, server_task in itertools.permutations(tasks, 2):
        reply = connect(task_container(swarm_cluster, client_task), overlay_address(server_task))
        assert reply == node_name(swarm_cluster, server_task)
    # The swarm's DNS answers on the overlay too (tasks.<service>: every task's address).
    reply = connect(task_container(swarm_cluster, tasks[0]), f"tasks.{service.name}")
    assert reply in node_names(swarm_cluster, tasks)


def connect(container: Container, host: str) -> str:
    """Connect from inside `container` to the echo server on `host`; return its answer."""
    code = (
        "import socket\n"
        f"with socket.create_connection(({host!r}, 8080), timeout=10) as conn:\n"
        "    print(conn.recv(100).decode())\n"
    )
    result = container.exec_run(["python3", "-c", code])
    output = result.output.decode(errors="replace").strip()
    assert result.exit_code == 0, f"connecting to {host}:8080 failed: {output}"
    return output


def test_an_image_pushed_from_the_host_starts_on_every_node(
    swarm_cluster: Cluster, swarm_sandbox_image: str, make_service: Callable[..., Service]
) -> None:
    assert swarm_sandbox_image.startswith(f"{swarm_cluster.registry_pull}/examhall/sandbox@")
    service = make_service(swarm_sandbox_image, name="everywhere", command=SLEEP, mode="global")
    nodes = [n.name for n in swarm_cluster.nodes if swarm_cluster.node_state(n.name) == "ready"]
    tasks = wait_for(
        service, lambda ts: len(ts) >= len(nodes), f"a running task on each of {nodes}"
    )
    assert set(node_names(swarm_cluster, tasks)) >= {"node-1", "node-2", "node-3"}
    digest = swarm_sandbox_image.split("@", 1)[1]
    for node in swarm_cluster.nodes[:3]:
        image = node.client.images.get(swarm_sandbox_image)
        assert any(d.endswith(digest) for d in image.attrs["RepoDigests"])


def test_drained_node_loses_its_tasks_and_activated_node_takes_new_ones(
    swarm_cluster: Cluster, swarm_sandbox_image: str, make_service: Callable[..., Service]
) -> None:
    service = make_service(
        swarm_sandbox_image,
        name="drain",
        command=SLEEP,
        mode=ServiceMode("replicated", replicas=3),
        maxreplicas=1,
    )
    wait_for(service, lambda ts: len(ts) == 3, "3 running tasks")
    swarm_cluster.drain("node-2")
    try:
        # Two nodes left for three replicas at most one per node: two run, none on node-2.
        tasks = wait_for(
            service,
            lambda ts: "node-2" not in node_names(swarm_cluster, ts) and len(ts) == 2,
            "node-2's task gone, two left running",
        )
        assert node_names(swarm_cluster, tasks) == ["node-1", "node-3"]
    finally:
        swarm_cluster.activate("node-2")
    wait_for(service, lambda ts: len(ts) == 3, "the third task back once node-2 is active")


def test_a_fresh_node_gets_images_through_the_registry_and_a_killed_node_goes_down(
    swarm_cluster: Cluster, swarm_sandbox_image: str, make_service: Callable[..., Service]
) -> None:
    service = make_service(swarm_sandbox_image, name="global", command=SLEEP, mode="global")
    wait_for(service, lambda ts: len(ts) >= 3, "a running task on each node")

    fresh = swarm_cluster.add_node()
    assert swarm_cluster.node_state(fresh.name) == "ready"
    # The new engine has never seen the image: its task can only run if it pulled it.
    wait_for(
        service,
        lambda ts: fresh.name in node_names(swarm_cluster, ts),
        f"a running task on the fresh {fresh.name}",
    )
    assert fresh.client.images.get(swarm_sandbox_image)

    swarm_cluster.kill_node(fresh.name)
    deadline = time.monotonic() + 60
    while swarm_cluster.node_state(fresh.name) != "down":
        assert time.monotonic() < deadline, f"{fresh.name} was killed but is still not down"
        time.sleep(0.5)
