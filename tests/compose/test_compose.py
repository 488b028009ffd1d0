"""The shared eval box as an operator runs it: `examhall box build`, `docker compose up` (on
SQLite, and on PostgreSQL with compose.postgres.yaml), a team and its token made on the box,
jobs over HTTP and their reports, then `docker compose down -v` while a trial runs, leaving
no container, volume or network behind.

Needs the Docker engine and Docker Compose (the `docker compose` plugin or docker-compose v1).
The first PostgreSQL run on a box without a registry builds its image with apt-get.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import docker
import docker.errors
import httpx
import pytest

from service.backends.docker import LABEL_JOB, LABEL_OWNER
from service.cli.box import ADMIN_TOKEN_KEY, read_env_file
from service.images.sandbox_image import BASE_LABEL, SANDBOX_REPO, resolve_base, sandbox_base
from tests.docker.conftest import free_port

# On a new machine the first run also bootstraps the Debian base and builds PostgreSQL with
# apt-get, which together can pass the suite's default of 600 s.
pytestmark = [pytest.mark.docker, pytest.mark.timeout(1500)]

REPO = Path(__file__).resolve().parents[2]
PROJECT_LABEL = "com.docker.compose.project"
SERVICE_LABEL = "com.docker.compose.service"
SMOKE_CASES = 4


def _compose_command() -> list[str]:
    for command in (["docker", "compose"], ["docker-compose"]):
        if shutil.which(command[0]) is None:
            continue
        if subprocess.run([*command, "version"], capture_output=True).returncode == 0:
            return command
    pytest.fail(
        "Docker Compose is not installed (neither `docker compose` nor `docker-compose` "
        "runs); install it (Debian: apt-get install docker-compose) or deselect -m docker"
    )


def _progress(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _wait_for(predicate: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if result := predicate():
            return result
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


@dataclass
class Box:
    project: str
    database: str  # "sqlite" or "postgres"
    compose: list[str]  # the compose command with this box's files, env file and project
    env: dict[str, str]
    url: str
    admin_token: str
    sandbox_base: str  # a base name no sandbox image was built on before this test

    def run(self, *args: str, timeout: float = 300) -> str:
        done = subprocess.run(
            [*self.compose, *args], env=self.env, capture_output=True, text=True, timeout=timeout
        )
        assert done.returncode == 0, f"compose {args} failed:\n{done.stdout}\n{done.stderr}"
        return done.stdout

    def logs(self) -> str:
        done = subprocess.run(
            [*self.compose, "logs", "--no-color"], env=self.env, capture_output=True, text=True
        )
        return (done.stdout + done.stderr)[-4000:]

    def client(self, token: str) -> httpx.Client:
        return httpx.Client(
            base_url=self.url, timeout=60, headers={"Authorization": f"Bearer {token}"}
        )


def box_env(directory: Path) -> tuple[Path, dict[str, str], int]:
    """A box's env file in `directory`, the environment its compose commands run in, and its
    port (a free one on loopback)."""
    env_file = directory / "box.env"
    # A setting of the operator's, which must reach the control plane through the env file.
    env_file.write_text("EXAMHALL_MAX_CONTAINERS=2\n")
    port = free_port()
    # The developer's own EXAMHALL_* and COMPOSE_* would take precedence over the env file.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("EXAMHALL_", "COMPOSE_"))}
    env |= {
        "EXAMHALL_ENV_FILE": str(env_file),
        "EXAMHALL_BIND": "127.0.0.1",
        "EXAMHALL_PORT": str(port),
    }
    return env_file, env, port


def compose_args(env_file: Path, project: str) -> list[str]:
    """What every compose command of a box's names: its env file, project and compose.yaml."""
    return ["--env-file", str(env_file), "-p", project, "-f", str(REPO / "compose.yaml")]


def box_build(env_file: Path, env: dict[str, str], *args: str) -> str:
    """`examhall box build` into `env_file` (skipped where the images are current); the box's
    admin token."""
    build = [sys.executable, "-m", "service.cli", "box", "build", "--env-file", str(env_file)]
    started = time.monotonic()
    done = subprocess.run([*build, *args], cwd=REPO, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-4000:]
    _progress(f"examhall box build: {time.monotonic() - started:.0f} s")
    return read_env_file(env_file)[ADMIN_TOKEN_KEY]


@pytest.fixture(params=["sqlite", "postgres"])
def box(
    request: pytest.FixtureRequest, tmp_path: Path, docker_client: docker.DockerClient
) -> Iterator[Box]:
    """A box built by the real `examhall box build` into an env file of this test, as a compose
    project of its own; brought down with its volumes (again) and its test images removed."""
    database: str = request.param
    project = f"examhall-test-{uuid.uuid4().hex[:8]}"
    # A new name for the sandbox's base, so that the control plane has to build the sandbox
    # image on its first start, as on a new box.
    fresh_base = f"examhall/compose-test-base:{project}"
    docker_client.images.get(resolve_base(docker_client, sandbox_base(), _progress)).tag(fresh_base)
    latest = next(iter(docker_client.images.list(f"{SANDBOX_REPO}:latest")), None)
    env_file, env, port = box_env(tmp_path)
    compose = [*_compose_command(), *compose_args(env_file, project)]
    build = ["--sandbox-base", fresh_base]
    if database == "postgres":
        compose += ["-f", str(REPO / "compose.postgres.yaml")]
        build += ["--postgres"]
    try:
        token = box_build(env_file, env, *build)
        yield Box(project, database, compose, env, f"http://127.0.0.1:{port}", token, fresh_base)
    finally:
        subprocess.run([*compose, "down", "-v", "--remove-orphans"], env=env, capture_output=True)
        # The sandbox build moved examhall/sandbox:latest to the test's image: put it back.
        tags = [fresh_base]
        for image in docker_client.images.list(filters={"label": f"{BASE_LABEL}={fresh_base}"}):
            tags = [*image.tags, *tags]
        for tag in tags:
            with contextlib.suppress(docker.errors.APIError):
                docker_client.images.remove(tag)
        if latest is not None:
            with contextlib.suppress(docker.errors.APIError):
                docker_client.api.tag(latest.id, SANDBOX_REPO, "latest")


def _healthy(box: Box, client: docker.DockerClient) -> bool:
    found = client.containers.list(all=True, filters={"label": f"{PROJECT_LABEL}={box.project}"})
    for container in found:
        # restart: unless-stopped would hide a crash behind a loop of fresh starts.
        assert container.status == "running" and container.attrs["RestartCount"] == 0, box.logs()
    try:
        return httpx.get(f"{box.url}/healthz", timeout=5).status_code == 200
    except httpx.TransportError:
        return False


def up_to_healthy(box: Box, client: docker.DockerClient) -> Any:
    """`compose up -d`, until the control plane answers /healthz; its container."""
    started = time.monotonic()
    box.run("up", "-d")
    _wait_for(lambda: _healthy(box, client), 300, "the control plane's /healthz")
    _progress(f"compose up to healthy: {time.monotonic() - started:.0f} s")
    (control_plane,) = client.containers.list(
        filters={"label": [f"{PROJECT_LABEL}={box.project}", f"{SERVICE_LABEL}=examhall"]}
    )
    return control_plane


def _submit(http: httpx.Client, **body: Any) -> str:
    response = http.post("/v1/jobs", json=body)
    assert response.status_code == 201, response.text
    job_id: str = response.json()["id"]
    return job_id


def _finished(http: httpx.Client, *job_ids: str) -> bool:
    return all(http.get(f"/v1/jobs/{job}").json()["status"] == "finished" for job in job_ids)


def test_compose_box_runs_jobs_and_leaves_nothing(
    box: Box, docker_client: docker.DockerClient
) -> None:
    control_plane = up_to_healthy(box, docker_client)
    environment = control_plane.attrs["Config"]["Env"]
    assert "EXAMHALL_MAX_CONTAINERS=2" in environment
    store = "postgresql+psycopg://" if box.database == "postgres" else "sqlite:////data/"
    assert any(v.startswith(f"EXAMHALL_DATABASE_URL={store}") for v in environment)
    assert any(m["Destination"] == "/var/run/docker.sock" for m in control_plane.attrs["Mounts"])
    assert httpx.get(f"{box.url}/v1/jobs").status_code == 401, "the API must need a token"
    # Built by the control plane on its first start, through the socket.
    (sandbox_image,) = docker_client.images.list(
        filters={"label": f"{BASE_LABEL}={box.sandbox_base}"}
    )

    # A team and its token, made on the box as docs/guides/run-a-box.md says.
    box.run("exec", "-T", "examhall", "examhall", "admin", "create-team", "alpha")
    token = box.run("exec", "-T", "examhall", "examhall", "admin", "create-token", "alpha")
    team, admin = box.client(token.strip().splitlines()[-1]), box.client(box.admin_token)
    smoke = _submit(team, suite="smoke", model={"provider": "simulated", "id": "coin?p=1"})
    probe = _submit(
        admin,
        suite="probes",
        cases=["no-docker-socket"],
        model={"provider": "faux", "id": "attack"},
    )
    _wait_for(lambda: _finished(team, smoke) and _finished(admin, probe), 180, "both jobs")

    report = team.get(f"/v1/jobs/{smoke}/report").json()
    (variant,) = report["variants"]
    assert variant["scored_trials"] == variant["outcomes"]["passed"] == SMOKE_CASES
    assert variant["pass_at_1"]["value"] == 1.0
    assert report["record"]["image"] in sandbox_image.tags
    assert report["record"]["model_requested"] == "simulated/coin?p=1"
    text = team.get(f"/v1/jobs/{smoke}/report", params={"format": "text"}).text
    assert smoke in text and "pass@1" in text
    # The probe looked for a Docker socket from inside its sandbox and found none.
    (trial,) = admin.get(f"/v1/jobs/{probe}/trials").json()
    assert trial["outcome"] == "passed", trial
    if box.database == "postgres":
        count = box.run("exec", "-T", "postgres", "psql", "-U", "examhall", "-d", "examhall",
                        "-tAc", "SELECT count(*) FROM trials")  # fmt: skip
        assert int(count) == SMOKE_CASES + 1

    # A trial that would run for two minutes, to stop the box under.
    source = (REPO / "tests/suites/slow.py").read_text().replace('"sleep 3"', '"sleep 120"')
    slow = _submit(
        admin,
        suite={"name": "slow", "source": source},
        cases=["slow-1"],
        model={"provider": "faux", "id": "solution"},
    )

    def running_sandbox() -> Any:
        found = docker_client.containers.list(filters={"label": f"{LABEL_JOB}={slow}"})
        return found[0] if found else None

    sandbox = _wait_for(running_sandbox, 60, "the slow trial's sandbox")
    # Started by the box's control plane, and given no socket (no mount at all).
    assert sandbox.labels[LABEL_OWNER].startswith(control_plane.attrs["Config"]["Hostname"])
    assert sandbox.attrs["Mounts"] == [] and not sandbox.attrs["HostConfig"]["Binds"]
    assert "docker.sock" not in json.dumps(sandbox.attrs)
    team.close()
    admin.close()

    started = time.monotonic()
    box.run("down", "-v")
    _progress(f"compose down with a trial running: {time.monotonic() - started:.0f} s")
    assert not docker_client.containers.list(all=True, filters={"label": f"{LABEL_JOB}={slow}"})
    project = {"label": f"{PROJECT_LABEL}={box.project}"}
    assert not docker_client.containers.list(all=True, filters=project)
    assert not docker_client.volumes.list(filters=project)
    assert not docker_client.networks.list(filters=project)
