"""A Docker engine of a test's own, run beside the box's (its own data, socket, cgroups, and
a network namespace of its own), so a test may stop and start it without touching the engine
the other tests and runs share.

The namespace is what keeps the host's networking whole: a dockerd started with `bridge:
none` deletes any interface named docker0 it can see as it starts (moby removes the default
bridge it is told not to use), which on the host is the shared engine's own bridge."""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import docker
import docker.errors
import pytest


class NestedEngine:
    def __init__(self, home: Path) -> None:
        self.home = home
        self.process: subprocess.Popen[bytes] | None = None
        (home / "daemon.json").write_text(
            json.dumps(
                {
                    "data-root": str(home / "data"),
                    "exec-root": str(home / "exec"),
                    "pidfile": str(home / "dockerd.pid"),
                    "hosts": [self.url],
                    # Nothing of the host's networking is touched: sandboxes have none.
                    "bridge": "none",
                    "iptables": False,
                    "ip6tables": False,
                    "cgroup-parent": f"/examhall-nested-{home.name}",
                }
            )
        )

    @property
    def url(self) -> str:
        return f"unix://{self.home / 'docker.sock'}"

    def client(self) -> docker.DockerClient:
        return docker.DockerClient(base_url=self.url, timeout=30)

    def answers(self) -> bool:
        try:
            client = self.client()  # asks the engine its version at once
        except docker.errors.DockerException:
            return False
        try:
            return bool(client.ping())
        except docker.errors.DockerException:
            return False
        finally:
            client.close()

    @property
    def netns(self) -> str:
        return f"exh-{self.home.name}"

    def start(self) -> None:
        if not (Path("/run/netns") / self.netns).exists():
            subprocess.run(["ip", "netns", "add", self.netns], check=True)
        self.process = subprocess.Popen(
            # nsenter enters the namespace alone: `ip netns exec` would also remount /sys,
            # hiding the cgroups the engine needs.
            [
                "nsenter",
                f"--net=/run/netns/{self.netns}",
                "dockerd",
                "--config-file",
                str(self.home / "daemon.json"),
            ],
            stdout=(self.home / "dockerd.log").open("ab"),
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            assert self.process.poll() is None, self.log()
            if self.answers():
                return
            time.sleep(0.2)
        raise AssertionError(f"the nested engine did not start:\n{self.log()}")

    def stop(self) -> None:
        """As a restart of the engine does: it stops its containers, then exits."""
        assert self.process is not None
        self.process.terminate()
        self.process.wait(timeout=120)
        self.process = None

    def log(self) -> str:
        return (self.home / "dockerd.log").read_text(errors="replace")[-3000:]


def nested_engine(image: str, host: docker.DockerClient) -> NestedEngine:
    """A new engine, started, holding `image` (copied from the `host` engine); skips the
    test where no dockerd is installed."""
    if not all(shutil.which(tool) for tool in ("dockerd", "ip", "nsenter")):
        pytest.skip("no dockerd, ip (iproute2) or nsenter to run a nested engine in a namespace")
    # Short: a socket's path has at most 107 bytes.
    engine = NestedEngine(Path(tempfile.mkdtemp(prefix="exh-engine-", dir="/tmp")))
    try:
        engine.start()
        client = engine.client()
        client.images.load(host.images.get(image).save(named=True))
        client.close()
    except BaseException:
        remove(engine)
        raise
    return engine


def remove(engine: NestedEngine) -> None:
    """Remove the engine's containers (all of them this test's), stop it, remove its files."""
    if engine.process is not None and engine.process.poll() is None:
        try:
            client = engine.client()
            for container in client.containers.list(all=True):
                container.remove(force=True)
            client.close()
        finally:
            engine.stop()
    subprocess.run(["ip", "netns", "delete", engine.netns], check=False)
    shutil.rmtree(engine.home, ignore_errors=True)
