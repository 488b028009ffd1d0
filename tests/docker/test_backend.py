"""The container each trial gets, and the reaper for containers nobody owns."""

from __future__ import annotations

import contextlib
import json
import logging
import socket
import subprocess
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import docker
import docker.errors
import pytest
import requests
from sqlalchemy import select

from sandbox.protocol import Event, ModelRef, RunSpec
from service.backends.base import LaunchSpec, SandboxError
from service.backends.docker import LABEL_OWNER, LABEL_TRIAL, DockerBackend, DockerSettings
from service.backends.docker.seccomp import profile_json
from service.launch.launcher import Launcher
from service.launch.trial import run_trial
from service.owners import owner_gone
from service.scheduler import Scheduler
from service.store.db import make_engine, migrate, session_factory
from service.store.models import Trial
from service.store.planes import beat
from service.suites.python import load_suite
from tests.store.conftest import submit

pytestmark = pytest.mark.docker


def test_container_is_hardened(backend: DockerBackend, docker_client: docker.DockerClient) -> None:
    container = docker_client.containers.create(
        **backend.container_config(LaunchSpec("inspect-me", "job"))
    )
    try:
        host = docker_client.api.inspect_container(container.id)["HostConfig"]
    finally:
        container.remove(force=True)
    assert host["NetworkMode"] == "none"
    assert host["CapDrop"] == ["ALL"]
    # SYS_RESOURCE only where the engine can grant it (not an engine in a container).
    assert sorted(host["CapAdd"]) == sorted(backend.worker_caps())
    assert set(backend.worker_caps()) - {"SYS_RESOURCE"} == {
        "CHOWN",
        "DAC_OVERRIDE",
        "FOWNER",
        "KILL",
        "SETGID",
        "SETUID",
    }
    assert host["SecurityOpt"][0] == "no-new-privileges"
    # examhall's own profile, not the engine's default: it denies by default.
    assert len(host["SecurityOpt"]) == 2 and host["SecurityOpt"][1].startswith("seccomp=")
    profile = json.loads(host["SecurityOpt"][1].removeprefix("seccomp="))
    assert profile == json.loads(profile_json())
    assert profile["defaultAction"] == "SCMP_ACT_ERRNO"
    assert host["ReadonlyRootfs"] is True
    assert host["Privileged"] is False
    assert host["Init"] is True
    assert host["Memory"] == host["MemorySwap"] > 0
    assert host["PidsLimit"] > 0 and host["NanoCpus"] > 0
    # The case code is imported from memory: no bundle directory to mount.
    assert set(host["Tmpfs"]) == {"/tmp", "/workspace", "/dev/mqueue"}
    assert host["Tmpfs"]["/dev/mqueue"].startswith("ro,")
    assert not host.get("Binds") and host["PidMode"] == ""


@pytest.fixture
def stranger(backend: DockerBackend, docker_client: docker.DockerClient) -> Iterator[Any]:
    """A container of someone else on the shared engine: another control plane's live
    trial, with the same labels a trial gets but not this test run's scope."""
    other = DockerBackend(DockerSettings(image=backend.settings.image), docker_client)
    container = docker_client.containers.create(
        **other.container_config(LaunchSpec("someone-elses-trial", "their-job"))
    )
    yield container
    with contextlib.suppress(docker.errors.NotFound):
        container.remove(force=True)


def test_reaper_removes_only_containers_no_trial_owns(
    backend: DockerBackend, docker_client: docker.DockerClient, stranger: Any
) -> None:
    orphan = docker_client.containers.create(
        **backend.container_config(LaunchSpec("orphan", "job"))
    )
    kept = docker_client.containers.create(
        **backend.container_config(LaunchSpec("still-running", "job"))
    )
    try:
        removed = Launcher(backend).reap(lambda found: found.trial_id != "still-running")
        assert removed == ["orphan"]
        with pytest.raises(docker.errors.NotFound):
            docker_client.containers.get(orphan.id)
        assert docker_client.containers.get(kept.id).labels[LABEL_TRIAL] == "still-running"
        # Not this run's to judge: a test never removes a container it did not start.
        assert docker_client.containers.get(stranger.id).labels[LABEL_TRIAL] == (
            "someone-elses-trial"
        )
    finally:
        for container in (orphan, kept):
            with contextlib.suppress(docker.errors.NotFound):
                container.remove(force=True)


def test_reap_orphans_spares_live_owners(
    backend: DockerBackend, docker_client: docker.DockerClient, stranger: Any
) -> None:
    dead = subprocess.Popen(["true"])
    dead.wait()
    gone_owner = f"{socket.gethostname()}:{dead.pid}:gone"
    orphan_config = backend.container_config(LaunchSpec("orphan-of-dead", "job"))
    orphan_config["labels"][LABEL_OWNER] = gone_owner
    orphan = docker_client.containers.create(**orphan_config)
    live = docker_client.containers.create(
        **backend.container_config(LaunchSpec("live-owner", "job"))
    )
    # Someone else's orphan is theirs to reap, not this test run's.
    other = DockerBackend(DockerSettings(image=backend.settings.image), docker_client)
    their_config = other.container_config(LaunchSpec("their-orphan", "job"))
    their_config["labels"][LABEL_OWNER] = gone_owner
    theirs = docker_client.containers.create(**their_config)
    try:
        assert Launcher(backend).reap(lambda found: owner_gone(found.owner)) == ["orphan-of-dead"]
        assert docker_client.containers.get(live.id).labels[LABEL_TRIAL] == "live-owner"
        assert docker_client.containers.get(theirs.id).labels[LABEL_TRIAL] == "their-orphan"
        assert docker_client.containers.get(stranger.id).status == "created"
    finally:
        for container in (orphan, live, theirs):
            with contextlib.suppress(docker.errors.NotFound):
                container.remove(force=True)


def test_recovery_takes_over_a_gone_planes_containers_and_spares_a_live_ones(
    backend: DockerBackend, docker_client: docker.DockerClient, tmp_path: Path
) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'store.db'}")
    migrate(engine)
    sessions = session_factory(engine)
    job = submit(sessions, cases=["create-greeting", "fix-config"])
    live, gone = "elsewhere:7:live", "elsewhere:8:gone"  # only `live` keeps beating
    beat(sessions, live)
    containers = []
    with sessions.begin() as session:
        trials = session.scalars(select(Trial).where(Trial.job_id == job.id)).all()
        for trial, owner in zip(trials, (live, gone), strict=True):
            trial.status, trial.owner = "running", owner
            config = backend.container_config(LaunchSpec(trial.id, job.id))
            config["labels"][LABEL_OWNER] = owner
            containers.append(docker_client.containers.create(**config))
    scheduler = Scheduler(sessions, backend)
    try:
        scheduler.recover()
        with sessions() as session:
            owners = [
                (t.status, t.owner) for t in session.scalars(select(Trial).order_by(Trial.order))
            ]
        assert owners == [("running", live), ("queued", None)]
        assert docker_client.containers.get(containers[0].id).labels[LABEL_OWNER] == live
        with pytest.raises(docker.errors.NotFound):
            docker_client.containers.get(containers[1].id)
    finally:
        scheduler.stop()
        engine.dispose()
        for container in containers:
            with contextlib.suppress(docker.errors.NotFound):
                container.remove(force=True)


def test_a_start_the_client_gave_up_on_is_an_infra_error_and_leaves_no_container(
    backend: DockerBackend, docker_client: docker.DockerClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The engine creates the container, then its client gives up on the start, as on a
    busy engine: docker-py lets requests' timeout through unwrapped."""

    def time_out(self: Any, **kwargs: Any) -> None:
        raise requests.exceptions.ReadTimeout("read timed out")

    monkeypatch.setattr(docker.models.containers.Container, "start", time_out)
    with pytest.raises(SandboxError, match="read timed out"):
        backend.start(LaunchSpec("times-out", "job"))
    left = docker_client.containers.list(all=True, filters={"label": f"{LABEL_TRIAL}=times-out"})
    assert left == []


class _EngineThatHoldsRemovals:
    """A relay on a loopback port to the real engine that, once armed, never answers a
    DELETE (it is not even passed on): a removal that outlasts the client's read timeout,
    as on a busy engine, for which docker-py lets requests' ReadTimeout through."""

    def __init__(self, engine: docker.DockerClient) -> None:
        # docker-py keeps a local engine's socket path on its adapter, a TCP one in the URL.
        path = getattr(getattr(engine.api, "_custom_adapter", None), "socket_path", None)
        url = urlsplit(engine.api.base_url)
        self._upstream: str | tuple[str | None, int | None] = path or (url.hostname, url.port)
        self.armed = threading.Event()
        self.held: list[socket.socket] = []
        self._open: list[socket.socket] = []
        self._server = socket.create_server(("127.0.0.1", 0))
        self.url = f"tcp://127.0.0.1:{self._server.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        with contextlib.suppress(OSError):  # closed
            while True:
                client, _ = self._server.accept()
                family = socket.AF_UNIX if isinstance(self._upstream, str) else socket.AF_INET
                upstream = socket.socket(family)
                upstream.connect(self._upstream)
                self._open += [client, upstream]
                threading.Thread(target=self._pipe, args=(client, upstream), daemon=True).start()
                threading.Thread(target=self._pipe, args=(upstream, client), daemon=True).start()

    def _pipe(self, source: socket.socket, target: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                if self.armed.is_set() and data.startswith(b"DELETE "):
                    self.held.append(source)  # kept open, never answered
                    return
                target.sendall(data)
            target.shutdown(socket.SHUT_WR)

    def close(self) -> None:
        self._server.close()
        for opened in self._open:
            opened.close()


def test_a_removal_that_times_out_after_the_result_keeps_the_result(
    sandbox_image: str, docker_client: docker.DockerClient, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 27: the worker's result is in, then the engine does not answer the removal in
    time. The run still returns, with its result, and the container is left to the reaper."""
    relay = _EngineThatHoldsRemovals(docker_client)
    client = docker.DockerClient(
        base_url=relay.url, version=docker_client.api.api_version, timeout=5
    )
    scope = f"tests-{uuid.uuid4().hex[:12]}"
    launcher = Launcher(DockerBackend(DockerSettings(image=sandbox_image, scope=scope), client))
    spec = RunSpec(
        trial_id=f"slow-removal-{uuid.uuid4().hex[:8]}",
        suite=load_suite("evals/smoke.py"),
        case_id="create-greeting",
        model=ModelRef.parse("faux/solution"),
    )

    def engine_goes_slow(event: Event) -> None:
        relay.armed.set()  # started by now: only the removal is left to hold

    try:
        with caplog.at_level(logging.WARNING, logger="service.backends.docker.backend"):
            record = run_trial(
                launcher, spec, job_id="tests", deadline_s=60, on_event=engine_goes_slow
            )
    finally:
        # The reaper, on an engine that answers: the same scope, so only this test's.
        reaper = DockerBackend(DockerSettings(image=sandbox_image, scope=scope), docker_client)
        reaped = reaper.reap(lambda found: list(found))
        client.close()
        relay.close()
    assert record.result.outcome == "passed", record.result
    assert record.sandbox is not None and record.sandbox.exit_code == 0
    assert relay.held, "the removal reached the relay and was held"
    assert any("was not removed (ReadTimeout" in r.getMessage() for r in caplog.records)
    assert reaped == [spec.trial_id]
    left = docker_client.containers.list(
        all=True, filters={"label": f"{LABEL_TRIAL}={spec.trial_id}"}
    )
    assert left == []
