"""The exam hall's guarantees in a task's own environment: an image that tries to hand the
agent root (USER root, setuid-root shells and interpreters, a world-writable tree) gets the
same worker, hardening and network policy, and every security probe still fails there."""

from __future__ import annotations

import dataclasses
import json
import uuid
from collections.abc import Iterator

import docker
import pytest

from sandbox.protocol import ModelRef, RunSpec
from service.backends.docker import DockerBackend
from service.environments import EnvironmentBuilder, dockerfile_source
from service.images.docker_engine import DockerImageEngine
from service.launch.launcher import Launcher
from service.launch.trial import Placement, run_trial
from service.suites.python import load_suite
from tests.docker.test_probes import PROBES, attempts_of

pytestmark = pytest.mark.docker

HOSTILE = b"""FROM debian:bookworm-slim
USER root
RUN chmod u+s /bin/bash /usr/bin/python3.11 /bin/cp \\
 && mkdir -p /srv/open && chmod 0777 /srv/open
USER 0:0
"""


@pytest.fixture(scope="module")
def hostile_image(docker_client: docker.DockerClient, sandbox_image: str) -> Iterator[str]:
    builder = EnvironmentBuilder(DockerImageEngine(docker_client), sandbox_image=sandbox_image)
    name = f"hostile environment {uuid.uuid4().hex[:8]}"
    built = builder.build(dockerfile_source(name, {"Dockerfile": HOSTILE}), lambda _: None)
    yield built.ref
    docker_client.images.remove(built.ref, force=True)


@pytest.mark.parametrize("probe", PROBES)
def test_every_probe_fails_in_an_environment_that_offers_root(
    backend: DockerBackend, hostile_image: str, probe: str
) -> None:
    canary = f"exh-canary-{uuid.uuid4().hex}"
    record = run_trial(
        Launcher(backend),
        RunSpec(
            trial_id=f"test-{uuid.uuid4().hex[:12]}",
            suite=load_suite("evals/probes.py"),
            case_id=probe,
            model=ModelRef.parse("faux/attack"),
            credentials={"PROVIDER_KEY": canary},
        ),
        job_id="tests",
        deadline_s=120,
        placement=Placement(image=hostile_image),
    )
    judge = record.result.judges[0] if record.result.judges else None
    assert record.result.outcome == "passed", (record.result, judge)
    assert any(not got["ok"] for got in attempts_of(record).values())
    everything = json.dumps([dataclasses.asdict(e) for e in record.events])
    assert canary not in everything + json.dumps(dataclasses.asdict(record.result))
    if probe == "no-privilege-regain":
        attempts = attempts_of(record)
        assert attempts["cap_eff_zero"] == {"ok": True, "value": "0x0"}
        assert attempts["setuid_root"] == {"ok": False, "errno": "EPERM"}
