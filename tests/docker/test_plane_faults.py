"""The parts under a running control plane fail (docs/operations/faults.md): its store's
PostgreSQL server restarts, its SQLite disk fills, its Docker engine restarts. The plane keeps
serving, names the fault on /healthz while it lasts, keeps the results it cannot write yet,
and resumes by itself: every trial is scored exactly once."""

from __future__ import annotations

import errno
import os
import sqlite3
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import httpx
import pytest
import sqlalchemy as sa

from service.backends.docker import LABEL_JOB, LABEL_TRIAL
from tests import nested_engine, own_postgres
from tests.docker.conftest import free_port, serve_process, wait_for, wait_healthy
from tests.nested_engine import NestedEngine
from tests.own_postgres import OwnPostgres

pytestmark = pytest.mark.docker

TOKEN = f"exh_faults_{uuid.uuid4().hex}"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
SLOW = {"name": "slow", "source": Path("tests/suites/slow.py").read_text()}
JOB = {"suite": SLOW, "model": {"provider": "faux", "id": "solution"}, "rounds": 2}


class Plane:
    """A control plane in a process of its own, as on a box, and what a test asks it."""

    def __init__(
        self,
        database_url: str,
        log: Path,
        processes: list[subprocess.Popen[bytes]],
        slots: int,
        env: dict[str, str] | None = None,
    ) -> None:
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        self.log = log
        self.process = serve_process(
            database_url, port, log, token=TOKEN, max_containers=slots, env=env
        )
        processes.append(self.process)
        wait_healthy(self.process, port, log)

    def get(self, path: str) -> httpx.Response:
        return httpx.get(f"{self.url}{path}", headers=AUTH, timeout=30)

    def post_job(self) -> httpx.Response:
        return httpx.post(f"{self.url}/v1/jobs", json=JOB, headers=AUTH, timeout=120)

    def health(self) -> dict[str, Any]:
        body: dict[str, Any] = httpx.get(f"{self.url}/healthz", timeout=30).json()
        return body

    def fault_kinds(self) -> list[str]:
        return [fault["kind"] for fault in self.health()["faults"]]

    def trials(self, job_id: str) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = self.get(f"/v1/jobs/{job_id}/trials").json()
        return found

    def running_trial(self, job_id: str, client: docker.DockerClient) -> str:
        """The id of a trial of the job whose sandbox is up, once there is one."""
        found: list[str] = []

        def running() -> bool:
            found[:] = [t["id"] for t in self.trials(job_id) if t["status"] == "running"]
            return bool(found) and bool(_sandboxes(client, f"{LABEL_TRIAL}={found[0]}"))

        wait_for(running, 120, "a running trial")
        return found[0]

    def alive(self) -> bool:
        return self.process.poll() is None


def _sandboxes(client: docker.DockerClient, label: str) -> list[Any]:
    return client.containers.list(all=True, sparse=True, filters={"label": label})


def _scored_once(database_url: str, job_id: str) -> list[tuple[str, int, int, str, str]]:
    """The job's trials as the store holds them: (case, round, attempt, status, outcome)."""
    engine = sa.create_engine(database_url)
    try:
        with engine.connect() as connection:
            rows = connection.execute(
                sa.text(
                    "SELECT case_id, round, attempt, status, outcome FROM trials "
                    "WHERE job_id = :job ORDER BY case_id, round, attempt"
                ),
                {"job": job_id},
            )
            return [tuple(row) for row in rows]  # type: ignore[misc]
    finally:
        engine.dispose()


def _assert_job_scored_once(plane: Plane, database_url: str, job_id: str) -> None:
    """Every planned trial ran once, passed, and is counted once in the report."""
    planned = [(case, round_) for case in ("slow-1", "slow-2") for round_ in (1, 2)]
    assert _scored_once(database_url, job_id) == [(*p, 1, "finished", "passed") for p in planned]
    report = plane.get(f"/v1/jobs/{job_id}/report").json()
    assert report["variants"][0]["scored_trials"] == 4
    outcomes = report["variants"][0]["outcomes"]
    assert (outcomes["passed"], outcomes["attempts"], outcomes["error"]) == (4, 4, 0)


def _assert_whole_transcript(plane: Plane, trial_id: str, job_id: str) -> None:
    """The trial's events, buffered while the store was away, are all there, once each:
    the same kinds in the same order as another trial's (the cases run the same script)."""

    def kinds(trial: str) -> list[str]:
        events = plane.get(f"/v1/trials/{trial}/events").json()
        assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
        return [e["type"] for e in events]

    others = [t["id"] for t in plane.trials(job_id) if t["id"] != trial_id]
    assert kinds(trial_id) == kinds(others[0])
    assert kinds(trial_id).count("tool_call") == 2


@pytest.fixture
def postgres() -> Iterator[OwnPostgres]:
    server = own_postgres.own_postgres()
    yield server
    own_postgres.remove(server)


def test_postgres_restarted_mid_job(
    postgres: OwnPostgres,
    processes: list[subprocess.Popen[bytes]],
    tmp_path: Path,
    sandbox_image: str,
    docker_client: docker.DockerClient,
) -> None:
    plane = Plane(postgres.url, tmp_path / "serve.log", processes, slots=1)
    created = plane.post_job()
    assert created.status_code == 201, created.text
    job_id = created.json()["id"]
    wait_for(lambda: any(t["status"] == "finished" for t in plane.trials(job_id)), 120,
             "a finished trial")  # fmt: skip
    interrupted = plane.running_trial(job_id, docker_client)

    postgres.stop()
    # The plane keeps serving: /healthz names the fault, a new job is refused with why.
    wait_for(lambda: "store_unreachable" in plane.fault_kinds(), 30, "/healthz to name it")
    health = plane.health()
    assert health["status"] == "unavailable" and health["database"].startswith("unreachable")
    refused = plane.post_job()
    assert refused.status_code == 503, refused.text
    assert "The store cannot be reached" in refused.json()["detail"]
    # The running trial ends while the store is away: its result waits in the plane.
    wait_for(lambda: not _sandboxes(docker_client, f"{LABEL_TRIAL}={interrupted}"), 120,
             "the running trial to end")  # fmt: skip
    assert plane.alive(), plane.log.read_text()[-3000:]

    postgres.start()
    wait_for(lambda: plane.health()["status"] == "ok", 60, "the plane to reconnect")
    assert plane.health()["faults"] == []
    wait_for(lambda: plane.get(f"/v1/jobs/{job_id}").json()["status"] == "finished", 180,
             "the job to finish")  # fmt: skip
    _assert_job_scored_once(plane, postgres.url, job_id)
    _assert_whole_transcript(plane, interrupted, job_id)
    assert not _sandboxes(docker_client, f"{LABEL_JOB}={job_id}")


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 16 MiB tmpfs for the store, unmounted after the test (its plane has ended by then:
    this fixture is set up before the test's `processes`, so it is torn down after)."""
    mount = tmp_path / "store"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=16m", "examhall-store", str(mount)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {done.stderr.strip()}")
    yield mount
    subprocess.run(["umount", str(mount)], check=True)


def _fill(path: Path) -> None:
    """Write `path` until its disk has no byte left."""
    with path.open("wb", buffering=0) as filler:
        for chunk in (1 << 20, 4096, 1):
            try:
                while True:
                    filler.write(b"\0" * chunk)
            except OSError as exc:
                assert exc.errno == errno.ENOSPC, exc


def test_store_disk_full_mid_job(
    small_disk: Path,
    processes: list[subprocess.Popen[bytes]],
    tmp_path: Path,
    sandbox_image: str,
    docker_client: docker.DockerClient,
) -> None:
    database = small_disk / "examhall.db"
    url = f"sqlite:///{database}"
    plane = Plane(url, tmp_path / "serve.log", processes, slots=2)
    created = plane.post_job()
    assert created.status_code == 201, created.text
    job_id = created.json()["id"]
    running = plane.running_trial(job_id, docker_client)

    # A reader's snapshot pins the write-ahead log, as a long report query does: the plane's
    # next commits must grow the log, rather than reuse the part a checkpoint already copied.
    reader = sqlite3.connect(database)
    reader.execute("BEGIN")
    reader.execute("SELECT count(*) FROM trials").fetchone()
    filler = small_disk / "filler"
    _fill(filler)
    try:
        refused = plane.post_job()
        assert refused.status_code == 503, refused.text
        assert "The store's disk is full" in refused.json()["detail"]
        assert refused.headers["retry-after"]
        assert plane.fault_kinds() == ["store_disk_full"]
        assert plane.health()["status"] == "unavailable"
        # Trials go on running, and end, while no result can be written.
        wait_for(lambda: not _sandboxes(docker_client, f"{LABEL_TRIAL}={running}"), 120,
                 "the running trial to end")  # fmt: skip
        assert plane.alive(), plane.log.read_text()[-3000:]
    finally:
        reader.close()
        filler.unlink()

    wait_for(lambda: plane.health()["status"] == "ok", 60, "the plane to resume")
    wait_for(lambda: plane.get(f"/v1/jobs/{job_id}").json()["status"] == "finished", 180,
             "the job to finish")  # fmt: skip
    _assert_job_scored_once(plane, url, job_id)
    _assert_whole_transcript(plane, running, job_id)
    # The refused job left nothing behind; the store's file is sound.
    assert [j["id"] for j in plane.get("/v1/jobs").json()] == [job_id]
    check = sqlite3.connect(database)
    try:
        assert check.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    finally:
        check.close()  # the tmpfs is unmounted next
    assert not _sandboxes(docker_client, f"{LABEL_JOB}={job_id}")
    assert os.statvfs(small_disk).f_bfree > 0


def _host_links() -> set[str]:
    return set(os.listdir("/sys/class/net"))


@pytest.fixture
def engine(sandbox_image: str, docker_client: docker.DockerClient) -> Iterator[NestedEngine]:
    before = _host_links()
    started = nested_engine.nested_engine(sandbox_image, docker_client)
    yield started
    nested_engine.remove(started)
    # The host's networking is the shared engine's: the nested one, started and stopped in
    # its own namespace, must not have taken an interface (docker0) from it.
    assert "docker0" not in before or "docker0" in _host_links(), "the nested engine took docker0"


def test_engine_restarted_mid_job(
    engine: NestedEngine, processes: list[subprocess.Popen[bytes]], tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'examhall.db'}"
    plane = Plane(url, tmp_path / "serve.log", processes, slots=2, env={"DOCKER_HOST": engine.url})
    client = engine.client()
    created = plane.post_job()
    assert created.status_code == 201, created.text
    job_id = created.json()["id"]

    def two_running() -> bool:
        running = [t for t in plane.trials(job_id) if t["status"] == "running"]
        return len(running) == 2 and len(_sandboxes(client, f"{LABEL_JOB}={job_id}")) == 2

    wait_for(two_running, 120, "two running trials")
    broken = {t["id"] for t in plane.trials(job_id) if t["status"] == "running"}

    engine.stop()
    wait_for(lambda: "engine_unreachable" in plane.fault_kinds(), 60, "/healthz to name it")
    # The trials the engine broke off end unscored, with its error; nothing else is started
    # while it is away, so their retries wait for it.
    wait_for(lambda: all(t["status"] == "finished" for t in plane.trials(job_id)
                         if t["id"] in broken), 60, "the broken trials to end")  # fmt: skip
    ended = [t for t in plane.trials(job_id) if t["id"] in broken]
    assert {(t["outcome"], t["error_kind"]) for t in ended} == {("error", "infra_error")}, ended
    time.sleep(3)
    assert not [t for t in plane.trials(job_id) if t["status"] == "running"]
    assert plane.alive(), plane.log.read_text()[-3000:]

    engine.start()
    client = engine.client()
    wait_for(lambda: plane.health()["status"] == "ok", 60, "the plane to see the engine")
    wait_for(lambda: plane.get(f"/v1/jobs/{job_id}").json()["status"] == "finished", 180,
             "the job to finish")  # fmt: skip
    rows = _scored_once(url, job_id)
    retried = [(case, round_) for case, round_, attempt, _, _ in rows if attempt == 2]
    assert len(retried) == 2, rows
    for case, round_, attempt, status, outcome in rows:
        wanted = "error" if attempt == 1 and (case, round_) in retried else "passed"
        assert (status, outcome) == ("finished", wanted), rows
    report = plane.get(f"/v1/jobs/{job_id}/report").json()
    assert report["variants"][0]["scored_trials"] == 4
    # The sandboxes the engine stopped are removed once it is back (the plane's reap).
    wait_for(lambda: not _sandboxes(client, f"{LABEL_JOB}={job_id}"), 60, "no sandbox left")
    client.close()
