"""stack.yaml on a three-node swarm, as docs/guides/several-boxes.md has an operator run it.

The images come from the real `examhall box build --swarm`, on the host. A swarm of its own
(not the session's) gets them on node-1, the box: labelled examhall.box=true, the other nodes
labelled with their engines' addresses as the control plane inside node-1 reaches them, every
node's engine trusting the box's registry at `box:5000` (node-1's alias on the swarm's
network, as BOX:5000 on real machines). Then `docker stack deploy` with .env exported, a team
and a token made with `docker exec`, one small job whose trials must run on other nodes than
the box and pass, `docker stack rm`, and the swarm torn down, leaving the host as it was.
"""

from __future__ import annotations

import collections
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import docker
import pytest
from docker.models.containers import Container

from service.cli.box import (
    IMAGE_KEY,
    POSTGRES_IMAGE_KEY,
    REGISTRY_IMAGE_KEY,
    read_env_file,
    update_env_file,
)
from service.images.sandbox_image import BASE_ENV
from tests.swarm.cluster import ENGINE_LABEL, ENGINE_PORT, LABEL_CLUSTER, Cluster, reap_orphans
from tests.swarm.conftest import host_swarm_state

# The first run on a machine also builds PostgreSQL from Debian's packages (minutes).
pytestmark = [pytest.mark.swarm, pytest.mark.timeout(1500)]

REPO = Path(__file__).resolve().parents[2]
STACK = "examhall"
BOX_ALIAS = "box"  # node-1's other name on the swarm's network: BOX in docs/guides/several-boxes.md
CONTROL_PLANE = f"{STACK}_examhall"  # the control plane's service
ROUNDS = 1  # the smoke suite's 4 cases once each
SMOKE_CASES = 4


def _progress(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _wait_for(predicate: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if result := predicate():
            return result
        time.sleep(1)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def _docker(*args: str, env: dict[str, str], timeout: float = 120) -> str:
    done = subprocess.run(
        ["docker", *args], env=env, cwd=REPO, capture_output=True, text=True, timeout=timeout
    )
    assert done.returncode == 0, f"docker {' '.join(args)} failed:\n{done.stdout}{done.stderr}"
    return done.stdout


def _exec(container: Container, *command: str) -> str:
    code, output = container.exec_run(list(command), demux=True)
    out, err = cast(tuple[bytes | None, bytes | None], output)
    text = (out or b"").decode()
    assert code == 0, f"{command} exited {code}:\n{text}{(err or b'').decode()}"
    return text


def _healthy(node: docker.DockerClient) -> Container | None:
    selector: dict[str, str | list[str] | bool] = {
        "label": f"com.docker.swarm.service.name={CONTROL_PLANE}"
    }
    for container in node.containers.list(filters=selector):
        if container.attrs["State"].get("Health", {}).get("Status") == "healthy":
            return container
    return None


def test_stack_on_three_nodes(docker_client: docker.DockerClient, tmp_path: Path) -> None:
    if shutil.which("docker") is None:
        pytest.fail("`docker stack deploy` needs the docker CLI; install it (Debian: docker.io)")
    host_before = host_swarm_state(docker_client)
    for label in reap_orphans(docker_client):
        _progress(f"Removed test swarm {label}, left behind by a process that died.")

    # The developer's own settings would take precedence over the env file.
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("EXAMHALL_", "COMPOSE_", "DOCKER_"))
    }
    env_file = tmp_path / ".env"
    started = time.monotonic()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "service.cli",
            "box",
            "build",
            "--swarm",
            "--env-file",
            f"{env_file}",
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    _progress(f"examhall box build --swarm: {time.monotonic() - started:.0f} s")
    # An operator's settings, which reach the control plane through the env file. All trials
    # at once, whatever this machine's CPU count (the default): Swarm spreads them.
    update_env_file(
        env_file,
        {
            "EXAMHALL_SWARM_REGISTRY_PULL": f"{BOX_ALIAS}:5000",
            "EXAMHALL_MAX_CONTAINERS": str(SMOKE_CASES * ROUNDS),
        },
    )
    settings = read_env_file(env_file)

    cluster = Cluster.start(
        docker_client,
        nodes=3,
        engine_args=["--insecure-registry", f"{BOX_ALIAS}:5000"],
        aliases={"node-1": [BOX_ALIAS]},
        progress=_progress,
    )
    try:
        box, others = cluster.nodes[0], cluster.nodes[1:]
        mark = time.monotonic()
        # Saved under the name stack.yaml (or .env) gives it: named=True would take the
        # image's first tag, which may be another one. The sandbox's base: the control plane
        # builds the sandbox image on it at its first start.
        for key in (IMAGE_KEY, POSTGRES_IMAGE_KEY, REGISTRY_IMAGE_KEY, BASE_ENV):
            tarball = docker_client.images.get(settings[key]).save(named=settings[key])
            # load takes the chunks as they come (its stub says bytes).
            box.client.images.load(cast(Any, tarball))
        _progress(f"images loaded on the box: {time.monotonic() - mark:.0f} s")
        # stack.yaml mounts the control plane's client certificate for TLS to the nodes'
        # engines from here; it must exist even when unused (these engines speak plain TCP).
        assert box.container.exec_run(["mkdir", "-p", "/etc/examhall/certs"]).exit_code == 0
        for node in cluster.nodes:
            swarm_node = cluster.manager.nodes.get(node.node_id)
            spec = swarm_node.attrs["Spec"]
            labels = spec.setdefault("Labels", {})
            if node is box:
                # The manager's own node needs no engine label.
                labels.pop(ENGINE_LABEL, None)
                labels["examhall.box"] = "true"
            else:
                labels[ENGINE_LABEL] = f"tcp://{node.address}:{ENGINE_PORT}"
            swarm_node.update(spec)

        # As docs/guides/several-boxes.md has it:
        # set -a; . ./.env; set +a; docker stack deploy -c stack.yaml examhall
        deploy_env = (
            env
            | settings
            | {
                "DOCKER_HOST": box.engine_url,
                "EXAMHALL_ENV_FILE": str(env_file),
            }
        )
        mark = time.monotonic()
        _docker("stack", "deploy", "-c", "stack.yaml", STACK, env=deploy_env)
        control_plane = _wait_for(lambda: _healthy(box.client), 300, "a healthy control plane")
        _progress(f"stack deploy to healthy: {time.monotonic() - mark:.0f} s")

        _exec(control_plane, "examhall", "admin", "create-team", "red", "--max-containers", "8")
        token = _exec(control_plane, "examhall", "admin", "create-token", "red").strip()
        health = json.loads(
            _exec(
                control_plane,
                "python3",
                "-c",
                "import urllib.request; print(urllib.request.urlopen("
                "'http://127.0.0.1:8000/healthz', timeout=10).read().decode())",
            )
        )
        assert health["nodes"] == {"ready": 3, "drained": 0, "down": 0}

        mark = time.monotonic()
        submitted = _exec(
            control_plane,
            "env",
            "EXAMHALL_SERVER=http://127.0.0.1:8000",
            f"EXAMHALL_TOKEN={token}",
            "examhall",
            "submit",
            "smoke",
            "--model",
            "simulated/coin?p=1",
            "--rounds",
            str(ROUNDS),
        )
        _progress(f"job of {SMOKE_CASES * ROUNDS} trials: {time.monotonic() - mark:.0f} s")
        # The report it prints ends the wait: "examhall report job-... (finished)".
        found = re.search(r"examhall report (job-[0-9a-f]+) \(finished\)", submitted)
        assert found, submitted
        job = found[1]
        trials = json.loads(
            _exec(
                control_plane,
                "python3",
                "-c",
                "import sys, urllib.request; print(urllib.request.urlopen(urllib.request."
                "Request(sys.argv[1], headers={'Authorization': 'Bearer ' + sys.argv[2]}), "
                "timeout=10).read().decode())",
                f"http://127.0.0.1:8000/v1/jobs/{job}/trials",
                token,
            )
        )
        by_node = collections.Counter(trial["node"] for trial in trials)
        _progress(f"trials by node: {dict(by_node)}")
        assert len(trials) == SMOKE_CASES * ROUNDS
        assert all(trial["outcome"] == "passed" for trial in trials), trials
        # Swarm spreads tasks by count, and the box already runs the stack's three services.
        assert set(by_node) <= {node.name for node in cluster.nodes}
        assert len(by_node) >= 2 and set(by_node) & {node.name for node in others}

        mark = time.monotonic()
        _docker("stack", "rm", STACK, env=deploy_env)
        _wait_for(
            # sparse: a full listing inspects each container it found, and one that Swarm
            # removes in between fails the listing with NotFound (seen in CI).
            lambda: (
                not box.client.containers.list(
                    all=True,
                    sparse=True,
                    filters={"label": f"com.docker.stack.namespace={STACK}"},
                )
            ),
            120,
            "the stack's containers to go",
        )
        _progress(f"stack rm: {time.monotonic() - mark:.0f} s")
        assert not box.client.services.list()
    finally:
        cluster.teardown()

    selector: dict[str, str | list[str] | bool] = {"label": f"{LABEL_CLUSTER}={cluster.label}"}
    assert not docker_client.containers.list(all=True, filters=selector)
    assert not docker_client.networks.list(filters=selector)
    assert not docker_client.volumes.list(filters=selector)
    assert host_swarm_state(docker_client) == host_before
