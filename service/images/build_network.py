"""The network a team's build runs on: it reaches examhall's build proxy and nothing else.

A `RUN` step on Docker's default bridge reaches whatever the bridge reaches: the host's own
services on the bridge's address, its other networks, a cloud's metadata endpoint. So builds
run on `examhall-build`, a network that is internal (no route out) and whose bridge holds no
address of the host's (`inhibit_ipv4`): the only peer a step can reach on it is the build
proxy (sandbox/build_proxy.py), which forwards HTTP and HTTPS to the named hosts the operator
allows (EXAMHALL_BUILD_EGRESS) and nothing else. Steps find it through the proxy variables
Docker passes to every `RUN` without baking them into the image (HTTP_PROXY and the rest).

The network and the proxy are the box's, shared by its control planes, made on first use and
made again when the allowed hosts or the sandbox image change (the proxy's label says which
it serves). The proxy runs the sandbox image's Python as nobody, read-only, without
capabilities, under memory and pids caps.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
import threading
from collections.abc import Collection
from dataclasses import dataclass

import docker
import docker.errors
import docker.models.containers
import docker.models.networks

NETWORK = "examhall-build"
PROXY = "examhall-build-proxy"
LABEL = "examhall.build-network"  # on both; the proxy's value is the hash of what it serves
PORT = 3128
# Where builds fetch packages unless the operator says otherwise: Debian's, Ubuntu's and
# PyPI's hosts (the bootstrapped base's own mirror is added by the caller).
DEFAULT_EGRESS = (
    "deb.debian.org",
    "security.debian.org",
    "archive.ubuntu.com",
    "security.ubuntu.com",
    "ports.ubuntu.com",
    "pypi.org",
    "files.pythonhosted.org",
)
PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy")
# The proxy's log lines (sandbox/build_proxy.py) that say its own way out failed.
_BOX_FAULT = re.compile(r"refused \S+: \S+ does not resolve|could not reach \S+")

_lock = threading.Lock()


@dataclass(frozen=True)
class BuildNetwork:
    name: str
    proxy_url: str  # http://ADDRESS:PORT, the proxy's address on the build network

    def build_args(self) -> dict[str, str]:
        """Docker's predefined proxy arguments: seen by every RUN, kept out of the image."""
        return {name: self.proxy_url for name in PROXY_VARIABLES}


def ensure_build_network(
    client: docker.DockerClient, image: str, hosts: Collection[str]
) -> BuildNetwork:
    """The build network with its proxy running for `hosts`, made or mended as needed."""
    allow = ",".join(sorted({h.strip().lower() for h in hosts if h.strip()}))
    serves = hashlib.sha256(f"{image}\n{allow}".encode()).hexdigest()[:16]
    with _lock:
        network = _network(client)
        proxy = _proxy(client, image, allow, serves, network)
        address = proxy.attrs["NetworkSettings"]["Networks"][NETWORK]["IPAddress"]
        return BuildNetwork(NETWORK, f"http://{address}:{PORT}")


def proxy_faults(client: docker.DockerClient, since: float) -> list[str]:
    """What the proxy logged since `since` (a Unix time) that is the box's fault, never a
    build's: a host the operator allows that did not resolve, or could not be reached. A
    build shows such a refusal only as `403 Forbidden [IP: ...]` (apt prints no body)."""
    try:
        proxy = client.containers.get(PROXY)
        text = bytes(proxy.logs(since=int(since))).decode("utf-8", "replace")
    except docker.errors.NotFound:
        return []
    return [line for line in text.splitlines() if _BOX_FAULT.search(line)]


def replace_proxy(client: docker.DockerClient) -> None:
    """Remove the proxy: the next build makes it anew, on the networks as they are now."""
    with _lock, contextlib.suppress(docker.errors.NotFound):
        client.containers.get(PROXY).remove(force=True)


def remove_build_network(client: docker.DockerClient) -> None:
    """The proxy and the network gone (for a box's teardown and the tests)."""
    with contextlib.suppress(docker.errors.NotFound):
        client.containers.get(PROXY).remove(force=True)
    with contextlib.suppress(docker.errors.NotFound):
        client.networks.get(NETWORK).remove()


def _network(client: docker.DockerClient) -> docker.models.networks.Network:
    try:
        return client.networks.get(NETWORK)
    except docker.errors.NotFound:
        pass
    try:
        return client.networks.create(
            NETWORK,
            driver="bridge",
            internal=True,
            options={"com.docker.network.bridge.inhibit_ipv4": "true"},
            labels={LABEL: "network"},
        )
    except docker.errors.APIError as exc:
        if exc.status_code != 409:
            raise
        return client.networks.get(NETWORK)  # another plane made it meanwhile


def _healthy(proxy: docker.models.containers.Container) -> bool:
    """Running, with an address on its way out (the default bridge) and on the builds'
    network: what the engine says of it, asked without sending a packet anywhere."""
    if proxy.status != "running":
        return False
    networks = proxy.attrs.get("NetworkSettings", {}).get("Networks") or {}
    return all((networks.get(name) or {}).get("IPAddress") for name in ("bridge", NETWORK))


def _proxy(
    client: docker.DockerClient,
    image: str,
    allow: str,
    serves: str,
    network: docker.models.networks.Network,
) -> docker.models.containers.Container:
    try:
        found = client.containers.get(PROXY)
        if (found.labels or {}).get(LABEL) == serves and _healthy(found):
            return found
        # Another image or other hosts, stopped, or cut off from its way out (a network
        # disconnected, or made again under it): made again below.
        found.remove(force=True)
    except docker.errors.NotFound:
        pass
    try:
        proxy = client.containers.create(
            image,
            name=PROXY,
            entrypoint=["python3", "-P", "-S", "-m", "sandbox.build_proxy"],
            command=["--listen", f"0.0.0.0:{PORT}", "--allow", allow],
            user="65534:65534",
            working_dir="/",
            read_only=True,
            cap_drop=["ALL"],
            security_opt=["no-new-privileges"],
            mem_limit=256 * 1024 * 1024,
            pids_limit=256,
            network="bridge",  # its own way out; the build network is joined below
            restart_policy={"Name": "unless-stopped", "MaximumRetryCount": 0},  # type: ignore[arg-type]
            labels={LABEL: serves},
            log_config=docker.types.LogConfig(type="json-file", config={"max-size": "10m"}),
        )
    except docker.errors.APIError as exc:
        if exc.status_code != 409:
            raise
        return client.containers.get(PROXY)
    network.connect(proxy)
    proxy.start()
    proxy.reload()
    return proxy
