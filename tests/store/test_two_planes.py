"""Two real control planes on one PostgreSQL database share a job: every trial runs once."""

from __future__ import annotations

import collections
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import docker
import httpx
import pytest
from sqlalchemy import URL, select

from service.backends.docker import LABEL_JOB, LABEL_OWNER, LABEL_TRIAL
from service.store.db import make_engine, session_factory
from service.store.models import Event, Job, Trial
from tests.docker.conftest import free_port, serve_process, wait_healthy
from tests.store.conftest import fresh_postgres_database

pytestmark = pytest.mark.docker

ROUNDS = 5  # x 4 smoke cases = 20 trials


@pytest.fixture
def postgres_url(postgres_server: URL) -> Iterator[str]:
    yield from fresh_postgres_database(postgres_server)


def _ours(client: docker.DockerClient, pids: list[int]) -> list[object]:
    prefixes = tuple(f"{socket.gethostname()}:{pid}:" for pid in pids)
    return [
        c
        for c in client.containers.list(all=True, filters={"label": LABEL_TRIAL})
        if c.labels.get(LABEL_OWNER, "").startswith(prefixes)
    ]


def test_two_control_planes_on_one_database_run_each_trial_once(
    postgres_url: str, sandbox_image: str, docker_client: docker.DockerClient, tmp_path: Path
) -> None:
    token = f"exh_planes_{uuid.uuid4().hex}"
    headers = {"Authorization": f"Bearer {token}"}
    logs = [tmp_path / "plane-a.log", tmp_path / "plane-b.log"]
    # Started together, so they also migrate the empty database at the same moment.
    ports = [free_port() for _ in logs]
    planes = [
        (serve_process(postgres_url, port, log, token=token, max_containers=2), port)
        for port, log in zip(ports, logs, strict=True)
    ]
    clients = [
        httpx.Client(base_url=f"http://127.0.0.1:{port}", headers=headers, timeout=120)
        for _, port in planes
    ]
    pids = [process.pid for process, _ in planes]
    try:
        for (process, port), log in zip(planes, logs, strict=True):
            wait_healthy(process, port, log)
        response = clients[0].post(
            "/v1/jobs",
            json={
                "suite": "smoke",
                "model": {"provider": "simulated", "id": "coin?p=1"},
                "rounds": ROUNDS,
            },
        )
        assert response.status_code == 201, response.text
        job_id, planned = response.json()["id"], response.json()["planned_trials"]
        deadline = time.monotonic() + 300
        # Asked of the other plane: the job is the database's, not one process's.
        while clients[1].get(f"/v1/jobs/{job_id}").json()["status"] != "finished":
            assert time.monotonic() < deadline, "the job did not finish in 300 s"
            for (process, _), log in zip(planes, logs, strict=True):
                assert process.poll() is None, log.read_text()[-3000:]
            time.sleep(0.2)
    finally:
        for http in clients:
            http.close()
        for process, _ in planes:
            process.terminate()
        for process, _ in planes:
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
    left = _ours(docker_client, pids)
    for container in left:
        container.remove(force=True)  # type: ignore[attr-defined]
    assert not left, "the control planes left containers behind"
    assert not docker_client.containers.list(all=True, filters={"label": f"{LABEL_JOB}={job_id}"})

    engine = make_engine(postgres_url)
    try:
        with session_factory(engine)() as session:
            job = session.get(Job, job_id)
            trials = session.scalars(select(Trial).where(Trial.job_id == job_id)).all()
            events = session.execute(
                select(Event.trial_id, Event.seq).join(Trial, Trial.id == Event.trial_id)
            ).all()
    finally:
        engine.dispose()
    assert job is not None and job.status == "finished"
    assert planned == job.planned == ROUNDS * 4 == len(trials)
    runs = collections.Counter((t.case_id, t.variant, t.round) for t in trials)
    assert set(runs.values()) == {1} and len(runs) == planned
    assert {(t.status, t.attempt, t.outcome) for t in trials} == {("finished", 1, "passed")}
    # One clean transcript per trial: a second run would have written its own seq 1, 2, ...
    seqs = collections.defaultdict(list)
    for trial_id, seq in events:
        seqs[trial_id].append(seq)
    assert set(seqs) == {t.id for t in trials}
    assert all(sorted(s) == list(range(1, len(s) + 1)) for s in seqs.values())
    # Both planes took trials: the owner column names the process that ran each one.
    by_pid = collections.Counter(int((t.owner or "").split(":")[1]) for t in trials)
    assert set(by_pid) == set(pids), by_pid
