"""The cgroup a build's RUN steps run in, so that the whole build shares one pids and memory cap.

The classic builder's API caps a step's memory and CPU but not its processes, and a step runs
as root, where `ulimit -u` binds nothing. What it does take is a parent cgroup for its step
containers. A pen is a container of our own, holding one sleeping process, created with the
build's pids, memory and CPU caps; the build names the pen's cgroup as its parent, so every
step container nests inside it and the kernel holds the steps to the pen's caps, which are
hierarchical. Everything goes through the engine's API: a control plane in a container, with
no write access to the host's cgroup tree, makes pens just as well.

This needs cgroup v1 with the cgroupfs driver: under the systemd driver a parent must be a
slice, and cgroup v2 allows no child cgroup beside the pen's own process. Elsewhere there is
no pen, and each step keeps only its own memory and CPU cap (`Pen.parent` is None).
"""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass

import docker
import docker.errors
import docker.types
from docker.models.containers import Container

from service.images.capped import OWNER_LABEL

PEN_LABEL = "examhall.build-pen"
_CGROUP_LINE = re.compile(r"^\d+:(?:[^:]*,)?pids(?:,[^:]*)?:(/\S*)$", re.MULTILINE)
_STARTUP_S = 10.0


@dataclass(frozen=True)
class Pen:
    parent: str | None  # the cgroup to give the build as its parent; None: no pen here
    why_none: str = ""
    container: str | None = None  # the pen's container, removed as the build ends


def pens_possible(client: docker.DockerClient) -> str | None:
    """None when this engine can nest a build's steps in a pen; else why not."""
    info = client.info()
    version, driver = str(info.get("CgroupVersion", "1")), str(info.get("CgroupDriver", ""))
    if version == "1" and driver == "cgroupfs":
        return None
    return (
        f"the engine runs cgroup v{version} with the {driver or 'unknown'} driver, where a "
        f"build's steps cannot share one cgroup (cgroup v1 with the cgroupfs driver can)"
    )


@contextlib.contextmanager
def build_pen(
    client: docker.DockerClient,
    image: str,
    *,
    pids: int,
    memory: int,
    cpu_shares: int,
    owner: str | None,
) -> Iterator[Pen]:
    """A pen for one build, removed when the build is done. `image` is one the box trusts
    (the sandbox image): the pen runs its `sh` and `sleep`, never the team's code."""
    why = pens_possible(client)
    if why is not None:
        yield Pen(None, why)
        return
    container = client.containers.create(
        image,
        entrypoint=["/bin/sh", "-c"],
        # Its cgroup, as the host names it (cgroup v1 gives a container the host's cgroup
        # namespace), then a sleep that holds the cgroup until the pen is removed.
        command=["cat /proc/self/cgroup && exec sleep 2147483647"],
        user="65534:65534",
        network_mode="none",
        cap_drop=["ALL"],
        security_opt=["no-new-privileges"],
        read_only=True,
        cgroupns="host",
        mem_limit=memory,
        memswap_limit=memory,
        pids_limit=pids,
        cpu_shares=cpu_shares,
        labels={PEN_LABEL: "1", **({OWNER_LABEL: owner} if owner else {})},
        log_config=docker.types.LogConfig(type="json-file", config={"max-size": "64k"}),
    )
    try:
        container.start()
        yield Pen(_cgroup(container), container=str(container.id))
    finally:
        with contextlib.suppress(docker.errors.NotFound):
            container.remove(force=True)


def _cgroup(container: Container) -> str:
    deadline = time.monotonic() + _STARTUP_S
    while time.monotonic() < deadline:
        found = _CGROUP_LINE.search(container.logs().decode(errors="replace"))
        if found:
            return found[1]
        container.reload()
        if container.status not in ("created", "running"):
            break
        time.sleep(0.02)
    raise docker.errors.DockerException(
        f"the build's pen {container.short_id} did not name its cgroup within "
        f"{_STARTUP_S:.0f} s; its output: {container.logs()[-500:]!r}"
    )
