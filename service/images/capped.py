"""One short command in an image a team built, held to the build's caps.

Building a team's environment means looking inside its image (which Python it has, which
glibc, whether it is musl) by running that image's own `/bin/sh` or `python3`: code the team
wrote. So every such run gets what a build step gets and less: no capabilities, no network,
no new privileges, a read-only root, the build's memory, pids and CPU caps, and a deadline
after which the container is killed. Its container carries the label that lets a plane's
reaper find it should the plane die mid-run, and is always removed.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import docker
import docker.errors
import docker.types
import requests.exceptions

CAPPED_LABEL = "examhall.capped-run"
# The control plane that started it (service/owners.py): a plane that dies mid-run leaves its
# container to the next plane's reaper (service/scheduler/prepare.py).
OWNER_LABEL = "examhall.build-owner"
_OUTPUT_LIMIT = 64 * 1024  # what a run may print that is read back
_POLL_S = 0.2


@dataclass(frozen=True)
class Caps:
    memory: int  # bytes, also the memory+swap cap
    pids: int
    cpu_shares: int
    timeout_s: float
    owner: str | None = None  # the control plane that runs it, for the reaper


class CappedRunError(Exception):
    """The run could not finish inside its caps: it ran out of time or was cancelled."""


@dataclass(frozen=True)
class Ran:
    status: int
    output: str  # stdout and stderr, the last _OUTPUT_LIMIT bytes


def run_capped(
    client: docker.DockerClient,
    image: str,
    argv: list[str],
    caps: Caps,
    *,
    user: str = "0:0",
    labels: dict[str, str] | None = None,
    cancel: threading.Event | None = None,
) -> Ran:
    """Run `argv` in `image` under `caps`; CappedRunError past the deadline or on `cancel`.
    The engine's own errors (no such image, no such executable) pass through."""
    container = client.containers.create(
        image,
        entrypoint=argv[:1],
        command=argv[1:],
        user=user,
        network_mode="none",
        cap_drop=["ALL"],
        security_opt=["no-new-privileges"],
        read_only=True,
        tmpfs={"/tmp": "size=16m"},
        mem_limit=caps.memory,
        memswap_limit=caps.memory,
        pids_limit=caps.pids,
        cpu_shares=caps.cpu_shares,
        labels={
            CAPPED_LABEL: "1",
            **({OWNER_LABEL: caps.owner} if caps.owner else {}),
            **(labels or {}),
        },
        # What it prints lands on the host's disk: a little is all that is read back.
        log_config=docker.types.LogConfig(type="json-file", config={"max-size": "1m"}),
    )
    try:
        container.start()
        deadline = time.monotonic() + caps.timeout_s
        # Short waits, so that a cancel is seen within _POLL_S and the deadline holds however
        # the engine's long poll behaves.
        while True:
            if cancel is not None and cancel.is_set():
                raise CappedRunError("it was cancelled")
            left = deadline - time.monotonic()
            if left <= 0:
                raise CappedRunError(f"it ran past its {caps.timeout_s:.0f} s")
            try:
                status = container.wait(timeout=min(_POLL_S, left))
                break
            except (requests.exceptions.ConnectionError, requests.exceptions.ReadTimeout):
                continue
        output = container.logs(stdout=True, stderr=True, tail=2000)
        return Ran(
            int(status.get("StatusCode", -1)), output[-_OUTPUT_LIMIT:].decode(errors="replace")
        )
    finally:
        with contextlib.suppress(docker.errors.NotFound):
            container.remove(force=True)


def reap_capped(client: docker.DockerClient, gone: Callable[[str], bool]) -> list[str]:
    """Remove the capped runs (and agent installs) whose owner `gone` says is gone; their
    ids."""
    removed = []
    for found in client.containers.list(all=True, sparse=True, filters={"label": OWNER_LABEL}):
        owner = (found.attrs.get("Labels") or {}).get(OWNER_LABEL, "")
        if owner and gone(owner):
            with contextlib.suppress(docker.errors.NotFound):
                client.api.remove_container(str(found.id), force=True)
                removed.append(str(found.id))
    return removed
