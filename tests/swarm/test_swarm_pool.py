"""The Swarm backend's warm pool (service/backends/swarm/pool.py) on a real three-node swarm: a
trial takes a service started ahead, placed and attached, which ran nothing of a suite and
holds no credential before the take, is as hardened as a trial's own (the security probes run
in one), serves one trial and is removed with it; a slot whose node is drained is never
handed out; the pool drains when idle; the reaper keeps a live plane's slots, counts a taken
one as its trial's, and removes a gone plane's."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from service.backends.base import POOL_PREFIX, FoundSandbox, LaunchSpec
from service.backends.docker import LABEL_OWNER, LABEL_SCOPE, LABEL_TRIAL
from service.backends.docker.hardening import LABEL_POOL
from service.backends.swarm import SwarmBackend, SwarmSettings
from service.launch.trial import TrialRecord
from service.scheduler import Scheduler
from service.store.db import make_engine, migrate, session_factory
from tests.conftest import run_suite_trial
from tests.docker.test_pool import (
    HARDENING,
    _dead_owner,
    assert_attack_fails_pooled,
    assert_only_the_worker_waits,
    wait_until,
)
from tests.docker.test_probes import PROBES
from tests.swarm.backends import leftovers
from tests.swarm.cluster import Cluster

pytestmark = pytest.mark.swarm


def pooled_backend(backend: SwarmBackend, **settings: Any) -> SwarmBackend:
    """A backend with a pool, in the test run's scope (so its reaps see only this run's)."""
    config = SwarmSettings(
        image=backend.image,
        scope=backend.settings.scope,
        local_image=backend.settings.local_image,
        **settings,
    )
    return SwarmBackend(config, backend.manager, backend.publisher)


@pytest.fixture
def pooled(backend: SwarmBackend) -> Iterator[SwarmBackend]:
    pooled = pooled_backend(backend, pool_size=1, pool_idle_s=600.0)
    yield pooled
    pooled.close_pool()


def slots(backend: SwarmBackend) -> list[dict[str, Any]]:
    """The pool services of `backend`'s owner, taken or not."""
    labels = [f"{LABEL_POOL}=1", f"{LABEL_OWNER}={backend.owner}"]
    labels.append(f"{LABEL_SCOPE}={backend.settings.scope}")
    return list(backend.swarm.services(filters={"label": labels}))


def ready(backend: SwarmBackend) -> int:
    return backend.pool.ready() if backend.pool is not None else 0


def warm(pooled: SwarmBackend, slots_wanted: int, **launch: Any) -> None:
    """Have the pool learn a configuration (from a trial that found no slot of it) and fill
    to `slots_wanted` services of it."""
    assert pooled.pool is not None
    config = pooled.service_config(LaunchSpec("warm", "tests", **launch))
    assert pooled.pool.take(config, "warm") is None  # a miss: the trial would start its own
    wait_until(lambda: ready(pooled) == slots_wanted, 120)


def trivial_trial(backend: SwarmBackend) -> TrialRecord:
    return run_suite_trial(backend, "smoke", "create-greeting", "simulated/coin?p=1")


def _scored(record: TrialRecord) -> dict[str, Any]:
    result = record.result
    return {
        "outcome": result.outcome,
        "score": result.score,
        "judges": [dataclasses.asdict(j) for j in result.judges],
        "error_kind": result.error_kind,
    }


def test_a_pooled_trial_runs_and_is_scored_as_its_own_and_its_service_goes_with_it(
    pooled: SwarmBackend, backend: SwarmBackend
) -> None:
    own = trivial_trial(backend)
    # The first trial finds no slot of its configuration: it starts its own service, and
    # the pool learns to keep one.
    first = trivial_trial(pooled)
    assert first.sandbox is not None and "pool_take" not in first.sandbox.timings
    wait_until(lambda: ready(pooled) == 1, 120)
    [slot] = slots(pooled)
    names = []
    for _ in range(2):
        record = trivial_trial(pooled)
        assert record.sandbox is not None and "pool_take" in record.sandbox.timings
        assert _scored(record) == _scored(own) == _scored(first)
        assert record.result.outcome == "passed", record.result
        names.append(record.sandbox.sandbox_id)
        # Used once: the service is removed with its trial, as a trial's own.
        assert not pooled.swarm.services(filters={"name": record.sandbox.sandbox_id})
        wait_until(lambda: ready(pooled) == 1, 120)
    assert names[0] == slot["Spec"]["Name"]
    assert len(set(names)) == 2


def test_a_waiting_slot_ran_no_suite_code_and_holds_no_credential(
    pooled: SwarmBackend, backend: SwarmBackend, swarm_cluster: Cluster
) -> None:
    warm(pooled, 1)
    assert pooled.pool is not None
    [slot] = slots(pooled)
    [task] = pooled.swarm.tasks(filters={"service": slot["Spec"]["Name"]})
    node = swarm_cluster.node(pooled.node_name(task["NodeID"]))
    [found] = node.client.containers.list(
        filters={"label": f"com.docker.swarm.service.name={slot['Spec']['Name']}"}
    )
    assert_only_the_worker_waits(found)
    # Its environment and confinement are those of a trial's own service: no key, the same
    # limits and hardening. Credentials come with the request, after the take.
    own = backend.start(LaunchSpec(f"own-{uuid.uuid4().hex[:8]}", "tests"))
    try:
        theirs = swarm_cluster.node(own.node or "").client.api.inspect_container(own.container_id)
        ours = node.client.api.inspect_container(found.id)
        assert ours["Config"]["Env"] == theirs["Config"]["Env"]
        assert {k: ours["HostConfig"].get(k) for k in HARDENING} == {
            k: theirs["HostConfig"].get(k) for k in HARDENING
        }
        assert ours["HostConfig"]["CapDrop"] == ["ALL"] and ours["HostConfig"]["ReadonlyRootfs"]
    finally:
        own.kill()
        own.remove()
    # Its labels, on the service and the container, let the reaper find it, under a trial
    # id that names no trial.
    for labels in (slot["Spec"]["Labels"], found.labels):
        assert labels[LABEL_TRIAL].startswith(POOL_PREFIX)
        assert labels[LABEL_OWNER] == pooled.owner


def test_a_slot_on_a_drained_node_is_never_handed_out(
    pooled: SwarmBackend, swarm_cluster: Cluster
) -> None:
    warm(pooled, 1)
    [slot] = slots(pooled)
    name = slot["Spec"]["Name"]
    [task] = pooled.swarm.tasks(filters={"service": name})
    drained = pooled.node_name(task["NodeID"])
    swarm_cluster.drain(drained)
    try:
        record = trivial_trial(pooled)
        assert record.result.outcome == "passed", record.result
        assert record.sandbox is not None and record.sandbox.sandbox_id != name
        assert record.sandbox.node != drained
        # The slot was discarded at the take rather than handed out.
        assert "pool_take" not in record.sandbox.timings
        assert not pooled.swarm.services(filters={"name": name})
    finally:
        swarm_cluster.activate(drained)


def test_an_idle_pool_drains_to_zero(backend: SwarmBackend) -> None:
    pooled = pooled_backend(backend, pool_size=2, pool_idle_s=10.0)
    try:
        warm(pooled, 2)
        assert len(slots(pooled)) == 2
        # No trial asks for it again: after idle_s its services are removed.
        wait_until(lambda: not slots(pooled), 60)
        assert ready(pooled) == 0
    finally:
        pooled.close_pool()


def test_the_pool_fills_only_the_room_the_box_has(backend: SwarmBackend) -> None:
    pooled = pooled_backend(backend, pool_size=3, pool_idle_s=600.0)
    try:
        room = [1]  # the box has one free slot
        pooled.limit_pool(lambda: room[0])
        warm(pooled, 1)
        wait_until(lambda: len(slots(pooled)) == 1)
        room[0] = 0  # a trial claimed it: the pool gives its service back
        wait_until(lambda: not slots(pooled), 60)
    finally:
        pooled.close_pool()


def test_the_reaper_keeps_a_live_planes_slots_counts_a_taken_one_as_its_trials_and_removes_a_gone_planes(  # noqa: E501
    pooled: SwarmBackend, backend: SwarmBackend, tmp_path: Path
) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'store.db'}")
    migrate(engine)
    sessions = session_factory(engine)
    gone = pooled_backend(backend, pool_size=1, pool_idle_s=600.0, owner=_dead_owner())
    try:
        for plane in (pooled, gone):
            warm(plane, 1)
        assert gone.pool is not None
        gone.pool.close(remove=False)  # the plane dies: its slot stays on the swarm
        [theirs] = slots(gone)
        [ours] = slots(pooled)
        # A taken slot is its trial's: the reaper is offered it under the trial's id.
        launch = LaunchSpec(f"taken-{uuid.uuid4().hex[:8]}", "tests")
        sandbox = pooled.start(launch)
        try:
            assert sandbox.id == ours["Spec"]["Name"]
            offered: list[FoundSandbox] = []

            def look(found: Sequence[FoundSandbox]) -> list[FoundSandbox]:
                offered.extend(found)
                return []

            pooled.reap(look)
            ids = [f.trial_id for f in offered if f.owner == pooled.owner]
            # (A refill may be starting meanwhile: a `pool-` id, which the scheduler spares.)
            assert launch.trial_id in ids and ours["Spec"]["Labels"][LABEL_TRIAL] not in ids
        finally:
            sandbox.kill()
            sandbox.remove()
        wait_until(lambda: ready(pooled) == 1, 120)
        [ours] = slots(pooled)
        # The live plane's recovery pass: its own waiting slot is kept, the gone one's goes.
        scheduler = Scheduler(sessions, pooled)
        try:
            scheduler.recover()
            assert pooled.swarm.services(filters={"name": ours["Spec"]["Name"]})
            assert not pooled.swarm.services(filters={"name": theirs["Spec"]["Name"]})
        finally:
            scheduler.stop()
        # Its stop removes the slots it kept.
        assert not slots(pooled)
    finally:
        engine.dispose()
        for service in slots(gone):
            backend.remove_sandbox(service["Spec"]["Name"], {})


@pytest.mark.parametrize("probe", PROBES)
def test_a_probes_attacks_fail_in_a_pooled_service(pooled: SwarmBackend, probe: str) -> None:
    """The security probes (evals/probes.py), each in a service the pool started ahead: the
    same attacks refused, and the canary credential, sent with the request, nowhere."""
    warm(pooled, 1)
    assert_attack_fails_pooled(pooled, probe)


def test_nothing_of_the_pools_is_left_on_the_swarm(
    backend: SwarmBackend, swarm_cluster: Cluster
) -> None:
    """After the tests above (this module runs in file order): no service, container or
    volume of a pool remains on any node."""
    assert leftovers(backend, swarm_cluster) == []
