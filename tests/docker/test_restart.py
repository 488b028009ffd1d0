"""SIGKILL the control plane mid-job, start it again: nothing is lost or counted twice."""

from __future__ import annotations

import signal
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

import docker
import httpx
import pytest
import sqlalchemy as sa

from service.backends.docker import LABEL_JOB
from tests.docker.conftest import free_port, serve_process, wait_for, wait_healthy

pytestmark = pytest.mark.docker

TOKEN = f"exh_restart_{uuid.uuid4().hex}"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def _serve(database: Path, port: int, log: Path) -> subprocess.Popen[bytes]:
    process = serve_process(f"sqlite:///{database}", port, log, token=TOKEN, max_containers=1)
    wait_healthy(process, port, log)
    return process


def test_sigkill_mid_job_then_restart(
    tmp_path: Path,
    sandbox_image: str,
    docker_client: docker.DockerClient,
    processes: list[subprocess.Popen[bytes]],
) -> None:
    database, log, port = tmp_path / "examhall.db", tmp_path / "serve.log", free_port()
    url = f"http://127.0.0.1:{port}"
    processes.append(_serve(database, port, log))
    source = Path("tests/suites/slow.py").read_text()
    created = httpx.post(
        f"{url}/v1/jobs",
        json={
            "suite": {"name": "slow", "source": source},
            "model": {"provider": "faux", "id": "solution"},
            "rounds": 2,
        },
        headers=AUTH,
        timeout=120,
    ).json()
    job_id = created["id"]

    def containers() -> list[object]:
        return docker_client.containers.list(all=True, filters={"label": f"{LABEL_JOB}={job_id}"})

    def trials() -> list[dict[str, object]]:
        result: list[dict[str, object]] = httpx.get(
            f"{url}/v1/jobs/{job_id}/trials", headers=AUTH
        ).json()
        return result

    # Let one trial finish and the next one get under way, then kill the control plane.
    wait_for(lambda: any(t["status"] == "finished" for t in trials()), 60, "a finished trial")
    wait_for(lambda: any(t["status"] == "running" for t in trials()) and containers(), 60,
              "a running trial")  # fmt: skip
    interrupted = next(t["id"] for t in trials() if t["status"] == "running")
    processes[0].send_signal(signal.SIGKILL)
    processes[0].wait(timeout=30)
    orphans = {c.id for c in containers()}  # type: ignore[attr-defined]
    assert orphans, "the killed control plane's container should still be there"

    processes.append(_serve(database, port, log))
    # On start the orphan is removed (the trial's rerun gets a new container).
    assert not orphans & {c.id for c in containers()}  # type: ignore[attr-defined]
    wait_for(
        lambda: httpx.get(f"{url}/v1/jobs/{job_id}", headers=AUTH).json()["status"] == "finished",
        120,
        "the job to finish after the restart",
    )
    final = trials()
    assert len(final) == created["planned_trials"] == 4
    assert sorted((t["case_id"], t["round"]) for t in final) == [
        (c, r) for c in ("slow-1", "slow-2") for r in (1, 2)
    ]
    assert all(t["status"] == "finished" and t["outcome"] == "passed" for t in final)
    # The interrupted trial ran again from scratch: one clean transcript, no duplicates.
    events = httpx.get(f"{url}/v1/trials/{interrupted}/events", headers=AUTH).json()
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert sum(e["type"] == "tool_call" for e in events) == 2
    report = httpx.get(f"{url}/v1/jobs/{job_id}/report", headers=AUTH).json()
    assert report["variants"][0]["scored_trials"] == 4
    assert report["variants"][0]["outcomes"]["passed"] == 4
    assert not containers()


def test_stopping_the_control_plane_requeues_running_trials(
    start_server: Any, tmp_path: Path, docker_client: docker.DockerClient
) -> None:
    """A graceful stop does not wait for long trials: it kills them and queues them again."""
    server = start_server(max_containers=1)
    source = Path("tests/suites/slow.py").read_text().replace('"sleep 3"', '"sleep 120"')
    created = server.submit(
        suite={"name": "slow", "source": source},
        model={"provider": "faux", "id": "solution"},
        cases=["slow-1"],
    )

    def running() -> bool:
        trials = server.http.get(f"/v1/jobs/{created['id']}/trials").json()
        return bool(trials) and trials[0]["status"] == "running"

    wait_for(running, 60, "the trial to start")
    time.sleep(1)  # let it stream a few events
    started = time.monotonic()
    server.stop()
    assert time.monotonic() - started < 30, "stopping waited for the trial"
    engine = sa.create_engine(server.database_url)
    with engine.connect() as connection:
        status = connection.execute(sa.text("SELECT status FROM trials")).scalar_one()
        events = connection.execute(sa.text("SELECT count(*) FROM events")).scalar_one()
    engine.dispose()
    assert (status, events) == ("queued", 0)
    assert not docker_client.containers.list(
        all=True, filters={"label": f"{LABEL_JOB}={created['id']}"}
    )
