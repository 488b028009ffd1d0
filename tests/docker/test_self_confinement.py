"""The worker confining itself: with the engine's seccomp profile and no-new-privileges off
(DockerSettings.engine_confinement=False, the seam the Swarm backend uses), every security
probe must still fail as designed, because the worker applied the same profile to itself."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import docker
import pytest

from service.backends.base import LaunchSpec
from service.backends.docker import DockerBackend, DockerSettings
from service.launch.trial import TrialRecord
from tests.conftest import run_suite_trial
from tests.docker.test_probes import PROBES, assert_attack_fails, attempts_of

pytestmark = pytest.mark.docker


def _settings(image: str) -> DockerSettings:
    # A scope of this module's own, as the shared `backend` fixture has.
    return DockerSettings(
        image=image, scope=f"tests-{uuid.uuid4().hex[:12]}", engine_confinement=False
    )


@pytest.fixture(scope="module")
def backend(docker_client: docker.DockerClient, sandbox_image: str) -> DockerBackend:
    """Overrides tests/conftest.py's: the `trial` fixture runs on a self-confining worker."""
    return DockerBackend(_settings(sandbox_image), docker_client)


class _NotAsked(DockerBackend):
    """The control: the same unconfined container, without asking the worker to confine."""

    def container_config(self, launch: LaunchSpec) -> dict[str, Any]:
        config = super().container_config(launch)
        config["environment"] = {}
        return config


def test_the_engine_applies_no_filter_and_the_worker_is_asked_to(
    backend: DockerBackend, docker_client: docker.DockerClient
) -> None:
    container = docker_client.containers.create(
        **backend.container_config(LaunchSpec("inspect-me", "job"))
    )
    try:
        inspected = docker_client.api.inspect_container(container.id)
    finally:
        container.remove(force=True)
    assert inspected["HostConfig"]["SecurityOpt"] == ["seccomp=unconfined"]
    assert "EXAMHALL_SELF_CONFINE=1" in inspected["Config"]["Env"]


@pytest.mark.parametrize("probe", PROBES)
def test_probe_attack_fails_on_a_self_confined_worker(
    trial: Callable[..., TrialRecord], probe: str
) -> None:
    assert_attack_fails(trial, probe)


def test_the_worker_records_its_confinement(trial: Callable[..., TrialRecord]) -> None:
    record = trial("evals/probes.py", "no-privilege-regain", "faux/attack")
    assert attempts_of(record)["no_new_privs"] == {"ok": True, "value": "1"}
    assert 0 < record.result.timings["self_confine"] < 5


def test_without_the_request_the_seccomp_probes_fail(
    docker_client: docker.DockerClient, sandbox_image: str
) -> None:
    """Control: in the same container but without EXAMHALL_SELF_CONFINE nothing refuses a
    vsock, so what made the probes above pass is the worker's own filter."""
    unasked = _NotAsked(_settings(sandbox_image), docker_client)
    record = run_suite_trial(unasked, "evals/probes.py", "no-exotic-sockets", "faux/attack")
    assert record.result.outcome == "failed", record.result
    assert attempts_of(record)["vsock_stream"].get("errno") != "EPERM"
