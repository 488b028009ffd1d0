"""The Swarm backend on a real three-node swarm: the backend contract and every security probe,
exactly as the Docker backend passes them (tests/docker/test_backend_contract.py and
tests/docker/test_probes.py, whose tests run here on this directory's `backend`)."""

from __future__ import annotations

import io
import tarfile
import uuid
from collections.abc import Callable

import docker
import pytest

from sandbox.confine import SELF_CONFINE_ENV
from sandbox.netcut import CUT_NETWORK_ENV
from service.backends.base import LaunchSpec, SandboxBackend, SandboxError
from service.backends.registry import create_backend
from service.backends.swarm import SwarmBackend, SwarmSettings
from service.backends.swarm.backend import PLACEMENTS, SANDBOX_NETWORK
from tests.docker.test_backend_contract import (  # noqa: F401  (collected here, on Swarm)
    Started,
    started,
    test_a_sandbox_answers_on_its_channel_and_exits,
    test_a_sandbox_that_cannot_start_is_a_sandbox_error_and_leaves_nothing,
    test_health_is_ok_on_a_working_engine,
    test_kill_ends_the_channel_and_wait_says_so,
    test_reap_offers_what_runs_and_removes_only_what_the_policy_picks,
)
from tests.docker.test_probes import (  # noqa: F401
    test_canary_probe_finds_a_planted_canary,
    test_probe_attack_fails,
    test_status_shows_no_new_privs_and_no_capabilities,
)
from tests.swarm.backends import leftovers
from tests.swarm.cluster import Cluster

pytestmark = pytest.mark.swarm


@pytest.fixture
def make_backend(backend: SwarmBackend) -> Callable[..., SandboxBackend]:
    """The contract's backends: this run's, or one whose image no node can pull."""

    def make(refuse: bool = False) -> SandboxBackend:
        if not refuse:
            return backend
        missing = f"{backend.publisher.pull_from}/examhall/none@sha256:{'0' * 64}"
        settings = SwarmSettings(
            image=missing, owner=backend.owner, scope=backend.settings.scope, place_timeout_s=60
        )
        return SwarmBackend(settings, backend.manager, backend.publisher)

    return make


def test_a_trial_is_a_service_placed_on_a_node_with_its_hardening(
    backend: SwarmBackend, swarm_cluster: Cluster
) -> None:
    """What the probes cannot see from inside, read from the engines: the service, its
    network that holds nothing else, and the container's confinement."""
    sandbox = backend.start(LaunchSpec(f"spec-{uuid.uuid4().hex[:8]}", "spec"))
    try:
        assert sandbox.node in {n.name for n in swarm_cluster.nodes}
        (service,) = backend.swarm.services(filters={"name": sandbox.id})
        assert service["Spec"]["Mode"] == {"Replicated": {"Replicas": 1}}
        assert service["Spec"]["TaskTemplate"]["RestartPolicy"]["Condition"] == "none"
        (network,) = [n for n in backend.swarm.networks() if n["Name"] == SANDBOX_NETWORK]
        assert network["Internal"] is True and network["Scope"] == "swarm"
        node = swarm_cluster.node(sandbox.node or "")
        container = node.client.api.inspect_container(sandbox.container_id)
        host = container["HostConfig"]
        assert host["ReadonlyRootfs"] and host["Init"] and not host["Privileged"]
        assert host["CapDrop"] == ["ALL"] and "SYS_ADMIN" not in (host["CapAdd"] or [])
        assert host["PidsLimit"] == backend.settings.resources.pids
        assert host["Memory"] == backend.settings.resources.memory_bytes
        assert list(container["NetworkSettings"]["Networks"]) == [SANDBOX_NETWORK]
        assert {f"{SELF_CONFINE_ENV}=1", f"{CUT_NETWORK_ENV}=1"} <= set(container["Config"]["Env"])
        assert not [m for m in container["Mounts"] if m["Type"] == "bind"]
        mounts = {m["Destination"]: m for m in container["Mounts"]}
        assert mounts["/workspace"]["Type"] == "volume"
    finally:
        sandbox.kill()
        sandbox.remove()


def test_the_backend_is_made_from_the_settings_as_the_control_plane_makes_it(
    monkeypatch: pytest.MonkeyPatch, swarm_cluster: Cluster, sandbox_image: str
) -> None:
    monkeypatch.setenv("EXAMHALL_SWARM_MANAGER", swarm_cluster.manager_url)
    monkeypatch.setenv("EXAMHALL_SWARM_REGISTRY", swarm_cluster.registry_push)
    monkeypatch.setenv("EXAMHALL_SWARM_REGISTRY_PULL", swarm_cluster.registry_pull)
    made = create_backend("swarm", lambda line: None)
    assert isinstance(made, SwarmBackend)
    assert made.image.startswith(f"{swarm_cluster.registry_pull}/examhall/trial@sha256:")
    assert made.health() == "ok"
    assert sorted(n.name for n in made.nodes()) == sorted(n.name for n in swarm_cluster.nodes)


def test_a_swarm_without_a_registry_or_a_manager_is_refused_with_what_to_set(
    monkeypatch: pytest.MonkeyPatch, docker_client: docker.DockerClient
) -> None:
    monkeypatch.delenv("EXAMHALL_SWARM_REGISTRY", raising=False)
    with pytest.raises(SandboxError, match="EXAMHALL_SWARM_REGISTRY"):
        create_backend("swarm", lambda line: None)
    if docker_client.info()["Swarm"].get("ControlAvailable"):
        return  # this engine is a manager: the refusal below cannot be shown on it
    monkeypatch.setenv("EXAMHALL_SWARM_REGISTRY", "127.0.0.1:1")
    monkeypatch.delenv("EXAMHALL_SWARM_MANAGER", raising=False)
    with pytest.raises(SandboxError, match="not a swarm manager"):
        create_backend("swarm", lambda line: None)


def test_direct_credentials_need_an_egress_network(backend: SwarmBackend) -> None:
    with pytest.raises(SandboxError, match="EXAMHALL_SWARM_EGRESS_NETWORK"):
        backend.start(LaunchSpec(f"egress-{uuid.uuid4().hex[:8]}", "egress", egress=True))


def test_a_container_its_node_cannot_start_is_placed_again_then_refused_with_why(
    backend: SwarmBackend, docker_client: docker.DockerClient, sandbox_image: str
) -> None:
    """A start that fails on the node (Docker's exit code 128 on a container that never ran,
    as a network endpoint that fails to join gives) ran no code of the trial: the backend
    places it again rather than hand back a channel to nothing, and says Docker's error when
    every placement failed. An image whose USER does not exist fails every start that way."""
    dockerfile = f"FROM {sandbox_image}\nUSER examhall-no-such-user\n".encode()
    context = io.BytesIO()
    with tarfile.open(fileobj=context, mode="w") as tar:
        info = tarfile.TarInfo("Dockerfile")
        info.size = len(dockerfile)
        tar.addfile(info, io.BytesIO(dockerfile))
    tag = f"examhall-test/start-fails:{uuid.uuid4().hex[:12]}"
    docker_client.images.build(
        fileobj=io.BytesIO(context.getvalue()), custom_context=True, tag=tag, rm=True, forcerm=True
    )
    launch = LaunchSpec(f"startfail-{uuid.uuid4().hex[:8]}", "startfail", image=tag)
    try:
        with pytest.raises(SandboxError) as refused:
            backend.start(launch)
    finally:
        docker_client.images.remove(tag, force=True)
    message = str(refused.value)
    assert f"could not be started {PLACEMENTS} times" in message
    # Each placement failed to start; the node may also fail one for a reason of its own
    # (CI once saw "network ... not found" first), but the image's cause is named.
    assert "examhall-no-such-user" in message
    assert backend.reap(lambda found: [f for f in found if f.trial_id == launch.trial_id]) == []


def test_nothing_of_this_run_is_left_on_the_swarm(
    backend: SwarmBackend, swarm_cluster: Cluster
) -> None:
    """After the tests above (this module runs in file order): no service, network,
    container or volume of theirs remains on any node."""
    assert leftovers(backend, swarm_cluster) == []
