"""Shared fixtures. The Docker ones are session-scoped: one client, one sandbox image build."""

from __future__ import annotations

import fcntl
import functools
import os
import socket
import sys
import tempfile
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import docker
import docker.errors
import pytest

from sandbox.protocol import ModelRef, RunSpec, SuiteBundle
from service.backends.docker import LABEL_OWNER, LABEL_TRIAL, DockerBackend, DockerSettings
from service.images.build_network import PROXY, remove_build_network
from service.images.sandbox_image import ensure_sandbox_image
from service.launch.launcher import Launcher
from service.launch.trial import TrialRecord, run_trial
from service.suites.python import load_suite


def _to_stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


@pytest.fixture(scope="session")
def docker_client() -> Iterator[docker.DockerClient]:
    try:
        client = docker.from_env()
        client.ping()
    except docker.errors.DockerException as exc:
        # Failing, not skipping: a suite that quietly skips its sandbox tests proves nothing.
        pytest.fail(f"the Docker engine is not reachable ({exc}); start it or deselect -m docker")
    yield client
    client.close()


@pytest.fixture(scope="session")
def sandbox_image(docker_client: docker.DockerClient) -> str:
    """A reference to an up-to-date sandbox image (built on first use, reused afterwards)."""
    return ensure_sandbox_image(docker_client, progress=_to_stderr)


@pytest.fixture(scope="session")
def backend(docker_client: docker.DockerClient, sandbox_image: str) -> DockerBackend:
    # A scope of this test run's own: its reaps never touch another process's containers.
    scope = f"tests-{uuid.uuid4().hex[:12]}"
    return DockerBackend(DockerSettings(image=sandbox_image, scope=scope), docker_client)


@pytest.fixture(scope="session", autouse=True)
def build_network_left_as_found() -> Iterator[None]:
    """Builds make the box's build network and proxy on first use (service/images/
    build_network.py); a test run that made them removes them, leaving the engine as it was.

    Other test runs on this engine (another checkout's CI, a second pytest) may be building
    through the same proxy: each run holds a shared lock on one file for its whole life, and
    the proxy goes only when the run ending can take that lock alone."""
    shared = os.path.join(tempfile.gettempdir(), "examhall-tests-build-network.lock")
    with open(shared, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_SH)
        try:
            client = docker.from_env()
            client.ping()
            there = bool(client.containers.list(all=True, filters={"name": f"^{PROXY}$"}))
        except docker.errors.DockerException:
            yield  # no engine: nothing can make them
            return
        yield
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            there = True  # another run still builds through them: it removes them
        if not there:
            remove_build_network(client)
        client.close()


@pytest.fixture(autouse=True)
def no_container_left_behind(request: pytest.FixtureRequest) -> Iterator[None]:
    """After every Docker test, no container this test process made may remain. (Containers
    of other processes on the engine are theirs to clean; the restart test checks its own
    subprocess's.)"""
    if request.node.get_closest_marker("docker") is None:
        yield
        return
    client = request.getfixturevalue("docker_client")
    ours = f"{socket.gethostname()}:{os.getpid()}:"
    yield
    # sparse: a full listing inspects each container and fails on one removed meanwhile.
    left = [
        c
        for c in client.containers.list(all=True, sparse=True, filters={"label": LABEL_TRIAL})
        if (c.attrs.get("Labels") or {}).get(LABEL_OWNER, "").startswith(ours)
    ]
    for container in left:
        container.remove(force=True)
    assert not left, f"containers left behind: {[c.attrs.get('Labels') for c in left]}"


def run_suite_trial(
    backend: DockerBackend,
    suite: str | SuiteBundle,
    case_id: str,
    model: str,
    *,
    deadline_s: float = 120.0,
    **spec: Any,
) -> TrialRecord:
    """Run one trial of a suite (a path, a shipped name, or a SuiteBundle) on `backend`."""
    bundle = suite if isinstance(suite, SuiteBundle) else load_suite(suite)
    return run_trial(
        Launcher(backend),
        RunSpec(
            trial_id=f"test-{uuid.uuid4().hex[:12]}",
            suite=bundle,
            case_id=case_id,
            model=ModelRef.parse(model),
            **spec,
        ),
        job_id="tests",
        deadline_s=deadline_s,
    )


@pytest.fixture
def trial(backend: DockerBackend) -> Callable[..., TrialRecord]:
    """Run one trial of a suite (a path, a shipped name, or a SuiteBundle) in real Docker."""
    return functools.partial(run_suite_trial, backend)
