"""Jobs through a real control plane on a three-node swarm: trials spread over the nodes, a
drained node gets none, a fresh node pulls the image through the box's registry, and a node
killed mid-job loses nothing and counts nothing twice. The node-changing tests run last
and leave the swarm as they found it, but for the node they add and kill."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from service.backends.swarm import SwarmBackend
from tests.docker.conftest import Server, serve
from tests.swarm.backends import leftovers
from tests.swarm.cluster import Cluster

pytestmark = pytest.mark.swarm

SLOW = {"name": "slow", "source": Path("tests/suites/slow.py").read_text()}
FAUX = {"provider": "faux", "id": "solution"}


@pytest.fixture
def server(tmp_path: Path, backend: SwarmBackend) -> Iterator[Server]:
    """A control plane whose scheduler runs trials on the swarm: up to 6 at once, two a node."""
    running = serve(
        f"sqlite:///{tmp_path / 'examhall.db'}", max_containers=6, make_backend=lambda: backend
    )
    yield running
    running.stop()


def _trials(server: Server, job_id: str) -> list[dict[str, Any]]:
    trials: list[dict[str, Any]] = server.http.get(f"/v1/jobs/{job_id}/trials").json()
    return trials


def _wait_for(what: Callable[[], bool], timeout_s: float, description: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not what():
        assert time.monotonic() < deadline, f"timed out waiting for {description}"
        time.sleep(0.2)


def _scored_once_each(trials: list[dict[str, Any]], cases: int, rounds: int) -> None:
    """Every (case, round) passed exactly once; any other attempt is an infra_error."""
    scored = [t for t in trials if t["outcome"] in ("passed", "failed")]
    assert all(t["outcome"] == "passed" for t in scored), [t["error_message"] for t in scored]
    assert Counter((t["case_id"], t["round"]) for t in scored) == Counter(
        {(c, r): 1 for c in {t["case_id"] for t in trials} for r in range(1, rounds + 1)}
    )
    assert len({t["case_id"] for t in trials}) == cases
    others = [t for t in trials if t["outcome"] not in ("passed", "failed")]
    assert all(t["error_kind"] == "infra_error" for t in others), others


def test_a_job_spreads_over_the_nodes(server: Server, swarm_cluster: Cluster) -> None:
    created = server.submit(suite=SLOW, model=FAUX, rounds=6)
    job = server.wait(created["id"], timeout=300)
    trials = _trials(server, created["id"])
    _scored_once_each(trials, cases=2, rounds=6)
    assert job["status"] == "finished"
    used = Counter(t["node"] for t in trials)
    assert set(used) == _ready(swarm_cluster), used


def test_health_and_metrics_report_the_nodes(server: Server, swarm_cluster: Cluster) -> None:
    # The session's swarm may hold a node an earlier test killed (tests/swarm/test_cluster.py).
    ready = _ready(swarm_cluster)
    health = server.http.get("/healthz").json()
    assert health["status"] == "ok"
    assert health["nodes"]["ready"] == len(ready) >= 3
    assert health["nodes"]["drained"] == 0
    states = _node_states(server)
    assert {name for name, state in states.items() if state == "ready"} == ready
    assert health["nodes"]["down"] == sum(state == "down" for state in states.values())
    metrics = server.http.get("/metrics").text
    assert f'examhall_nodes{{state="ready"}} {len(ready)}' in metrics
    for name in ready:
        assert f'examhall_node_trials{{node="{name}"}} 0' in metrics


def test_a_task_suite_runs_in_its_environment_pushed_to_the_nodes(
    server: Server, swarm_cluster: Cluster
) -> None:
    """A Harbor task's environment is built on the control plane's engine, pushed to the box's
    registry when its trial starts, and pulled by the node Swarm picks; its verifier scores
    the trial there as on one box (the oracle passes, nop fails)."""
    created = server.submit(
        suite="harbor_demo",
        cases=["count-lines"],
        variants={"nop": {"agent": "nop"}, "oracle": {"agent": "oracle"}},
        baseline="nop",
        rounds=2,
    )
    job = server.wait(created["id"], timeout=1200)
    assert job["error"] is None, job["error"]
    trials = _trials(server, created["id"])
    # A real swarm's engines now and then fail to start a container; such an attempt is an
    # infra_error and runs again, so each (variant, round) is scored exactly once.
    scored = [t for t in trials if t["outcome"] in ("passed", "failed")]
    assert Counter((t["variant"], t["round"]) for t in scored) == Counter(
        {(v, r): 1 for v in ("nop", "oracle") for r in (1, 2)}
    ), [(t["variant"], t["outcome"], t["error_message"]) for t in trials]
    assert {(t["variant"], t["outcome"]) for t in scored} == {
        ("oracle", "passed"),
        ("nop", "failed"),
    }, [(t["variant"], t["outcome"], t["error_message"]) for t in trials]
    others = [t for t in trials if t not in scored]
    assert all(t["error_kind"] == "infra_error" for t in others), others
    assert all(t["image"].startswith("examhall/env:") for t in trials)
    assert {t["node"] for t in trials} <= _ready(swarm_cluster)


def test_a_drained_node_gets_no_trials(server: Server, swarm_cluster: Cluster) -> None:
    swarm_cluster.drain("node-2")
    try:
        _wait_for(lambda: swarm_cluster.manager.nodes.get(swarm_cluster.node("node-2").node_id)
                  .attrs["Spec"]["Availability"] == "drain", 30, "the drain")  # fmt: skip
        assert _node_states(server)["node-2"] == "drained"
        assert server.http.get("/healthz").json()["nodes"]["drained"] >= 1
        created = server.submit(suite=SLOW, model=FAUX, rounds=4)
        server.wait(created["id"], timeout=300)
        trials = _trials(server, created["id"])
        _scored_once_each(trials, cases=2, rounds=4)
        assert "node-2" not in {t["node"] for t in trials}
    finally:
        swarm_cluster.activate("node-2")


def test_a_node_drained_mid_trial_loses_its_trials_to_the_others(
    server: Server, backend: SwarmBackend, swarm_cluster: Cluster
) -> None:
    node = swarm_cluster.node("node-3")
    created = server.submit(suite=SLOW, model=FAUX, rounds=6)
    job_id = created["id"]
    _wait_for(lambda: _running_on(backend, node.node_id) > 0, 120, "a trial on node-3")
    swarm_cluster.drain(node.name)
    try:
        server.wait(job_id, timeout=600)
    finally:
        swarm_cluster.activate(node.name)
    trials = _trials(server, job_id)
    _scored_once_each(trials, cases=2, rounds=6)
    lost = [t for t in trials if t["error_kind"] == "infra_error"]
    assert lost and all("drained" in t["error_message"] for t in lost), lost
    assert {t["node"] for t in lost} == {node.name}
    assert leftovers(backend, swarm_cluster) == []


def test_a_fresh_node_pulls_the_image_through_the_registry_and_a_killed_node_loses_nothing(
    server: Server, backend: SwarmBackend, swarm_cluster: Cluster
) -> None:
    fresh = swarm_cluster.add_node()
    assert not fresh.client.images.list(), "a fresh node starts with no image"
    others = sorted(_ready(swarm_cluster) - {fresh.name})
    for name in others:
        swarm_cluster.drain(name)
    try:
        # Only the fresh node is left: its trials run on what it pulled from the registry.
        created = server.submit(suite=SLOW, model=FAUX, rounds=1, cases=["slow-1"])
        server.wait(created["id"], timeout=300)
        (trial,) = _trials(server, created["id"])
        assert (trial["outcome"], trial["node"]) == ("passed", fresh.name), trial
        assert fresh.client.images.list(), "the fresh node pulled the sandbox image"
    finally:
        for name in others:
            swarm_cluster.activate(name)

    # Now kill that node while trials run on it: each of them is an infra_error attempt and
    # runs again elsewhere; nothing is lost and nothing is counted twice.
    created = server.submit(suite=SLOW, model=FAUX, rounds=8)
    job_id = created["id"]
    _wait_for(lambda: _running_on(backend, fresh.node_id) > 0, 120, "a trial on the fresh node")
    swarm_cluster.kill_node(fresh.name)
    job = server.wait(job_id, timeout=600)
    assert job["status"] == "finished"
    trials = _trials(server, job_id)
    _scored_once_each(trials, cases=2, rounds=8)
    lost = [t for t in trials if t["error_kind"] == "infra_error"]
    assert lost, "the killed node's trials should have been lost"
    assert all(fresh.name in (t["error_message"] or "") or t["node"] == fresh.name for t in lost)
    scored_nodes = {t["node"] for t in trials if t["outcome"] == "passed"}
    assert scored_nodes <= set(others) | {fresh.name}
    report = server.http.get(f"/v1/jobs/{job_id}/report").json()
    assert report["variants"][0]["scored_trials"] == 16
    _wait_for(lambda: swarm_cluster.node_state(fresh.name) == "down", 60, "the manager to see it")
    assert _node_states(server)[fresh.name] == "down"
    assert server.http.get("/healthz").json()["nodes"]["down"] >= 1
    assert leftovers(backend, swarm_cluster) == []


def _running_on(backend: SwarmBackend, node_id: str) -> int:
    """This run's trials running on a node now, as the manager sees them."""
    ours = backend.swarm.services(filters={"label": f"examhall.scope={backend.settings.scope}"})
    tasks = backend.swarm.tasks(filters={"node": node_id, "desired-state": "running"})
    ids = {s["ID"] for s in ours}
    return sum(t["ServiceID"] in ids and t["Status"]["State"] == "running" for t in tasks)


def _node_states(server: Server) -> dict[str, str]:
    """Each node's state, as /metrics gives it to an admin."""
    states = {}
    for line in server.http.get("/metrics").text.splitlines():
        if line.startswith("examhall_node_state{") and line.endswith(" 1"):
            labels = dict(part.split("=", 1) for part in line[20:].split("}")[0].split(","))
            states[labels["node"].strip('"')] = labels["state"].strip('"')
    return states


def _ready(cluster: Cluster) -> set[str]:
    """The nodes the manager has ready and active now, by name."""
    return {
        node.attrs["Description"]["Hostname"]
        for node in cluster.manager.nodes.list()
        if node.attrs["Status"]["State"] == "ready"
        and node.attrs["Spec"]["Availability"] == "active"
    }
