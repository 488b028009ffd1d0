"""What every sandbox backend owes the launch layer (service/backends/base.py), tried on
each backend alike: the real Docker engine and the fake. A new backend joins `BACKENDS` and
must pass the same tests."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator, Sequence

import pytest

from sandbox.protocol import CaseInfo, CasesMessage, ListCasesRequest, SuiteBundle, encode
from service.backends.base import (
    FoundSandbox,
    LaunchSpec,
    Sandbox,
    SandboxBackend,
    SandboxError,
)
from service.backends.docker import DockerBackend, DockerSettings
from service.backends.fake import FakeBackend, FakeWorker
from service.launch.worker_lines import parse_worker_line

pytestmark = pytest.mark.docker

SUITE = SuiteBundle(
    "contract",
    "from sandbox import judges\nfrom sandbox.suite import Case\n"
    "CASES = [Case(id='only', input='p', judges=[judges.file_absent('x')])]\n",
)
KILLED = 137


def _fake_worker(w: FakeWorker) -> int:
    """Answers a listing as the real worker does; waits, as it does, until then."""
    request = json.loads(w.request)
    if request.get("type") != "list_cases":
        return 2
    w.say(CasesMessage(cases=[CaseInfo(id="only")]))
    return 0


# docker-pooled: the Docker backend with its warm pool (service/backends/docker/pool.py)
# full, so that each start takes a container started ahead.
BACKENDS = ["docker", "docker-pooled", "fake"]


@pytest.fixture(params=BACKENDS)
def make_backend(
    request: pytest.FixtureRequest,
) -> Callable[..., SandboxBackend]:
    def make(refuse: bool = False) -> SandboxBackend:
        if request.param == "fake":
            problem = "no such image" if refuse else None
            return FakeBackend(_fake_worker, refuse=lambda launch: problem)
        backend: DockerBackend = request.getfixturevalue("backend")
        if request.param == "docker-pooled" and not refuse:
            return _warm_pool(backend, request)
        if not refuse:
            return backend
        settings = DockerSettings(
            image="examhall/no-such-image:0",
            owner=backend.owner,
            scope=backend.settings.scope,
        )
        missing = DockerBackend(settings, backend.client)
        missing._caps = backend.worker_caps()  # the probe would need the missing image
        return missing

    return make


def _warm_pool(backend: DockerBackend, request: pytest.FixtureRequest) -> DockerBackend:
    settings = DockerSettings(
        image=backend.image,
        owner=backend.owner,
        scope=backend.settings.scope,
        pool_size=2,
        pool_idle_s=600.0,
    )
    pooled = DockerBackend(settings, backend.client)
    request.addfinalizer(pooled.close_pool)
    assert pooled.pool is not None
    pooled.pool.take(pooled.container_config(LaunchSpec("warm", "contract")), "warm")
    deadline = time.monotonic() + 60
    while pooled.pool.ready() < 2:
        assert time.monotonic() < deadline, "the pool did not fill"
        time.sleep(0.1)
    return pooled


class Started:
    """Starts sandboxes on the backend under test, each for a trial id of its own."""

    def __init__(self, backend: SandboxBackend) -> None:
        self.backend = backend
        self.made: list[Sandbox] = []

    def start(self) -> tuple[Sandbox, str]:
        trial_id = f"contract-{uuid.uuid4().hex[:10]}"
        self.made.append(self.backend.start(LaunchSpec(trial_id, "contract")))
        if isinstance(self.backend, DockerBackend) and self.backend.pool is not None:
            # Taken from the pool, filled with two for the at most two starts of a test.
            assert "pool_take" in self.made[-1].timings
        return self.made[-1], trial_id


@pytest.fixture
def started(make_backend: Callable[..., SandboxBackend]) -> Iterator[Started]:
    made = Started(make_backend())
    yield made
    for sandbox in made.made:  # whatever a test leaves is removed
        sandbox.kill()
        sandbox.remove()


def _cases(sandbox: Sandbox, timeout_s: float = 60.0) -> CasesMessage:
    """The first cases message on the channel (a real worker reports its steps first)."""
    data = b""
    deadline = time.monotonic() + timeout_s
    while True:
        while b"\n" in data:
            line, data = data.split(b"\n", 1)
            message = parse_worker_line(line)
            if isinstance(message, CasesMessage):
                return message
        assert time.monotonic() < deadline, f"no cases from the worker: {data[:200]!r}"
        chunk = sandbox.channel.read()
        assert chunk, f"the channel ended first: {sandbox.channel.stderr_tail()}"
        data += chunk


def test_a_sandbox_answers_on_its_channel_and_exits(started: Started) -> None:
    sandbox, _ = started.start()
    assert sandbox.id
    sandbox.channel.send(encode(ListCasesRequest(suite=SUITE)))
    assert [case.id for case in _cases(sandbox).cases] == ["only"]
    ended = sandbox.wait(60)
    assert (ended.exit_code, ended.oom_killed) == (0, False)


def test_kill_ends_the_channel_and_wait_says_so(started: Started) -> None:
    sandbox, _ = started.start()  # its worker waits for a request that never comes
    sandbox.kill()
    deadline = time.monotonic() + 30
    while sandbox.channel.read():
        assert time.monotonic() < deadline, "the channel outlived the kill"
    assert sandbox.wait(30).exit_code == KILLED
    sandbox.kill()  # a second kill of a dead sandbox is no error


def test_reap_offers_what_runs_and_removes_only_what_the_policy_picks(started: Started) -> None:
    backend = started.backend
    _, doomed = started.start()
    _, spared = started.start()
    offered: list[str] = []

    def policy(found: Sequence[FoundSandbox]) -> list[FoundSandbox]:
        mine = [f for f in found if f.trial_id in (doomed, spared)]
        assert all(f.owner == backend.owner for f in mine)
        offered.extend(f.trial_id for f in mine)
        return [f for f in mine if f.trial_id == doomed]

    assert backend.reap(policy) == [doomed]
    assert sorted(offered) == sorted([doomed, spared])
    offered.clear()
    assert backend.reap(policy) == []
    assert offered == [spared]


def test_a_sandbox_that_cannot_start_is_a_sandbox_error_and_leaves_nothing(
    make_backend: Callable[..., SandboxBackend],
) -> None:
    backend = make_backend(refuse=True)
    launch = LaunchSpec(f"contract-{uuid.uuid4().hex[:10]}", "contract")
    with pytest.raises(SandboxError):
        backend.start(launch)
    left = backend.reap(lambda found: [f for f in found if f.trial_id == launch.trial_id])
    assert left == []


def test_health_is_ok_on_a_working_engine(make_backend: Callable[..., SandboxBackend]) -> None:
    assert make_backend().health() == "ok"
