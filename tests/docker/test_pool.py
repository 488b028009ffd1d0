"""The Docker backend's warm pool (service/backends/docker/pool.py): a trial takes a container
started ahead, which ran nothing of a suite or agent and holds no credential before the take,
is as hardened as a trial's own (the security probes run in one), serves one trial and is
gone; the pool holds only the box's room, drains when idle, and a gone plane's is reaped."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import docker
import docker.errors
import pytest

from service.backends.base import POOL_PREFIX, LaunchSpec, SandboxBackend
from service.backends.docker import (
    LABEL_OWNER,
    LABEL_SCOPE,
    LABEL_TRIAL,
    DockerBackend,
    DockerSettings,
)
from service.backends.docker.hardening import LABEL_POOL
from service.launch.trial import TrialRecord
from service.scheduler import Scheduler
from service.store.db import make_engine, migrate, session_factory
from tests.conftest import run_suite_trial
from tests.docker.conftest import Server
from tests.docker.test_probes import PROBES, assert_attack_fails

pytestmark = pytest.mark.docker

# What shapes a container's confinement: a pooled one must match a trial's own on each.
HARDENING = (
    "CapDrop",
    "CapAdd",
    "SecurityOpt",
    "ReadonlyRootfs",
    "Privileged",
    "Init",
    "Memory",
    "MemorySwap",
    "PidsLimit",
    "NanoCpus",
    "NetworkMode",
    "IpcMode",
    "Tmpfs",
    "Runtime",
)


def wait_until(check: Callable[[], bool], timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, "the pool did not get there in time"
        time.sleep(0.1)


def pooled_backend(
    backend: DockerBackend, docker_client: docker.DockerClient, **settings: object
) -> DockerBackend:
    """A backend with a pool, in the test run's scope (so its reaps see only this run's)."""
    return DockerBackend(
        DockerSettings(image=backend.image, scope=backend.settings.scope, **settings),  # type: ignore[arg-type]
        docker_client,
    )


@pytest.fixture
def pooled(backend: DockerBackend, docker_client: docker.DockerClient) -> Iterator[DockerBackend]:
    pooled = pooled_backend(backend, docker_client, pool_size=1, pool_idle_s=600.0)
    yield pooled
    pooled.close_pool()


def slots(
    client: docker.DockerClient, backend: DockerBackend
) -> list[docker.models.containers.Container]:
    """The pool containers of `backend`'s owner, taken or not."""
    # One the pool removes while listed is skipped (a full listing inspects each).
    return client.containers.list(
        all=True,
        ignore_removed=True,
        filters={
            "label": [
                f"{LABEL_POOL}=1",
                f"{LABEL_OWNER}={backend.owner}",
                f"{LABEL_SCOPE}={backend.settings.scope}",
            ]
        },
    )


def trivial_trial(backend: DockerBackend) -> TrialRecord:
    return run_suite_trial(backend, "smoke", "create-greeting", "simulated/coin?p=1")


def warm(pooled: DockerBackend, slots_wanted: int, **launch: Any) -> None:
    """Have the pool learn a configuration (from a trial that found no container of it) and
    fill to `slots_wanted` containers of it."""
    pool = pooled.pool
    assert pool is not None
    config = pooled.container_config(LaunchSpec("warm", "tests", **launch))
    assert pool.take(config, "warm") is None  # a miss: the trial would start its own
    wait_until(lambda: pool.ready() == slots_wanted)


def test_a_trial_runs_in_a_pooled_container_used_once(
    pooled: DockerBackend, docker_client: docker.DockerClient
) -> None:
    # The first trial finds no slot of its configuration: it starts its own, and the pool
    # learns to keep one.
    first = trivial_trial(pooled)
    assert first.result.outcome == "passed", first.result
    assert first.sandbox is not None and "pool_take" not in first.sandbox.timings
    assert pooled.pool is not None
    wait_until(lambda: pooled.pool is not None and pooled.pool.ready() == 1)
    [slot] = slots(docker_client, pooled)
    ids = []
    for _ in range(2):
        record = trivial_trial(pooled)
        assert record.result.outcome == "passed", record.result
        assert record.sandbox is not None and "pool_take" in record.sandbox.timings
        ids.append(record.sandbox.sandbox_id)
        # Used once: gone with its trial.
        with pytest.raises(docker.errors.NotFound):
            docker_client.containers.get(record.sandbox.sandbox_id)
        wait_until(lambda: pooled.pool is not None and pooled.pool.ready() == 1)
    assert ids[0] == slot.id
    assert len(set(ids)) == 2


def test_a_waiting_slot_ran_no_suite_code_and_holds_no_credential(
    pooled: DockerBackend, backend: DockerBackend, docker_client: docker.DockerClient
) -> None:
    warm(pooled, 1)
    [slot] = slots(docker_client, pooled)
    assert_only_the_worker_waits(slot)
    # Its environment is the one any trial's container starts with: no key. Credentials
    # reach a trial in its request (or through the control plane's gateway), after the take.
    own = docker_client.containers.create(**backend.container_config(LaunchSpec("own", "t")))
    try:
        assert slot.attrs["Config"]["Env"] == own.attrs["Config"]["Env"]
        # And it is confined exactly as a trial's own container.
        ours = docker_client.api.inspect_container(slot.id)["HostConfig"]
        theirs = docker_client.api.inspect_container(own.id)["HostConfig"]
        assert {k: ours.get(k) for k in HARDENING} == {k: theirs.get(k) for k in HARDENING}
        assert ours["NetworkMode"] == "none" and ours["CapDrop"] == ["ALL"]
    finally:
        own.remove(force=True)
    # Its labels let the reaper find it, under a trial id that names no trial.
    assert slot.labels[LABEL_TRIAL].startswith(POOL_PREFIX)
    assert slot.labels[LABEL_OWNER] == pooled.owner


def assert_only_the_worker_waits(container: docker.models.containers.Container) -> None:
    """A waiting slot's worker is up: the init, the root supervisor and its child, which
    drops to the sandbox user only once it has a request. Nothing else has run, as nothing
    else runs."""
    wait_until(lambda: len(container.top()["Processes"]) == 3, 10)
    processes = container.top(ps_args="-o pid,uid,args")["Processes"]
    assert [uid for _, uid, _ in processes] == ["0", "0", "0"]
    assert [args.split("--")[-1].strip() for _, _, args in processes] == [
        "python3 -P -S -m sandbox.worker"
    ] * 3


def test_an_idle_pool_drains_to_zero(
    backend: DockerBackend, docker_client: docker.DockerClient
) -> None:
    pooled = pooled_backend(backend, docker_client, pool_size=2, pool_idle_s=2.0)
    try:
        warm(pooled, 2)
        assert len(slots(docker_client, pooled)) == 2
        # No trial asks for it again: after idle_s its containers are removed.
        wait_until(lambda: not slots(docker_client, pooled), 20)
        assert pooled.pool is not None and pooled.pool.ready() == 0
    finally:
        pooled.close_pool()


def test_the_pool_fills_only_the_room_the_box_has(
    backend: DockerBackend, docker_client: docker.DockerClient
) -> None:
    pooled = pooled_backend(backend, docker_client, pool_size=3, pool_idle_s=600.0)
    try:
        assert pooled.pool is not None
        room = [1]  # the box has one free slot
        pooled.limit_pool(lambda: room[0])
        warm(pooled, 1)
        time.sleep(1.5)  # a keeper's pass or more: it starts no second one
        [held] = slots(docker_client, pooled)
        # A trial of another configuration holds the box's last slot: the pool gives its
        # container back before the trial's own starts.
        room[0] = 0
        pooled.pool.take(
            pooled.container_config(LaunchSpec("other", "tests", memory_bytes=512 * 2**20)),
            "other",
        )
        with pytest.raises(docker.errors.NotFound):
            docker_client.containers.get(held.id)
    finally:
        pooled.close_pool()
    assert not slots(docker_client, pooled)


def test_the_pool_gives_back_what_the_box_no_longer_has_room_for(
    backend: DockerBackend, docker_client: docker.DockerClient
) -> None:
    pooled = pooled_backend(backend, docker_client, pool_size=2, pool_idle_s=600.0)
    try:
        room = [2]
        pooled.limit_pool(lambda: room[0])
        warm(pooled, 2)
        room[0] = 1  # trials claimed a slot while the pool held it
        wait_until(lambda: len(slots(docker_client, pooled)) == 1, 10)
        assert pooled.pool is not None and pooled.pool.ready() == 1
    finally:
        pooled.close_pool()
    assert not slots(docker_client, pooled)


def _dead_owner() -> str:
    """An owner naming a process of this host that has exited: a gone plane."""
    probe = subprocess.Popen(["true"])
    probe.wait()
    return f"{socket.gethostname()}:{probe.pid}:gone"


def test_a_live_planes_slots_are_kept_and_a_gone_planes_reaped(
    pooled: DockerBackend,
    backend: DockerBackend,
    docker_client: docker.DockerClient,
    tmp_path: Path,
) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'store.db'}")
    migrate(engine)
    sessions = session_factory(engine)
    gone = pooled_backend(
        backend, docker_client, pool_size=1, pool_idle_s=600.0, owner=_dead_owner()
    )
    try:
        for plane in (pooled, gone):
            warm(plane, 1)
        assert gone.pool is not None
        gone.pool.close(remove=False)  # the plane dies: its slot stays on the engine
        [theirs] = slots(docker_client, gone)
        [ours] = slots(docker_client, pooled)
        # The live plane's recovery pass: its own waiting slot is kept, the gone one's goes.
        scheduler = Scheduler(sessions, pooled)
        try:
            scheduler.recover()
            assert docker_client.containers.get(ours.id).status == "running"
            with pytest.raises(docker.errors.NotFound):
                docker_client.containers.get(theirs.id)
        finally:
            scheduler.stop()
        # Its stop removes the slots it kept.
        assert not slots(docker_client, pooled)
    finally:
        engine.dispose()
        for container in slots(docker_client, gone):
            with contextlib.suppress(docker.errors.NotFound):
                container.remove(force=True)


def test_a_job_on_a_box_with_a_pool_runs_its_trials_in_pooled_containers(
    backend: DockerBackend,
    docker_client: docker.DockerClient,
    start_server: Callable[..., Server],
) -> None:
    """Through the API, with the scheduler holding the box's cap: a job's trial teaches the
    pool its configuration, the next job's trial runs in the container the pool started
    meanwhile, and the plane's stop leaves none behind."""
    pooled = pooled_backend(backend, docker_client, pool_size=1, pool_idle_s=600.0)
    server = start_server(max_containers=2, make_backend=lambda: pooled)

    def one_trial() -> dict[str, Any]:
        created = server.submit(
            suite="smoke",
            cases=["create-greeting"],
            model={"provider": "simulated", "id": "coin?p=1"},
        )
        server.wait(created["id"])
        [trial] = server.http.get(f"/v1/jobs/{created['id']}/trials").json()
        assert trial["outcome"] == "passed", trial
        return dict(trial)

    first = one_trial()
    assert "container_pool_take" not in first["timings"]
    wait_until(lambda: pooled.pool is not None and pooled.pool.ready() == 1)
    [waiting] = slots(docker_client, pooled)
    second = one_trial()
    assert "container_pool_take" in second["timings"]
    assert second["container_id"] == waiting.id != first["container_id"]
    server.stop()
    assert not slots(docker_client, pooled)


@pytest.mark.parametrize("probe", PROBES)
def test_a_probes_attacks_fail_in_a_pooled_container(pooled: DockerBackend, probe: str) -> None:
    """The security probes (evals/probes.py), each in a container the pool started ahead: the
    same attacks refused, and the canary credential, sent with the request, nowhere."""
    warm(pooled, 1)
    assert_attack_fails_pooled(pooled, probe)


def assert_attack_fails_pooled(backend: SandboxBackend, probe: str) -> None:
    """One security probe in a trial that must run in a slot its pool started ahead (the
    Swarm backend's pool runs them too: tests/swarm/test_swarm_pool.py)."""

    def trial(*args: Any, **kwargs: Any) -> TrialRecord:
        record = run_suite_trial(backend, *args, **kwargs)
        assert record.sandbox is not None and "pool_take" in record.sandbox.timings
        return record

    assert_attack_fails(trial, probe)
