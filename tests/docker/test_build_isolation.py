"""A team's build, as a hostile team would write it, on the real engine: it cannot name another
team's image however it spells it, cannot make the engine fetch from the host's network,
runs every probe of its image under the build's caps and deadline, holds all its RUN steps
to one pids cap and its layers to a disk cap, stops on a cancel and leaves no layer then,
and keeps the steps before a step that failed for the next build to resume after.

The victim is an environment of this run's own repository holding a root-only secret; every
image made here is tagged in that repository or removed by id, and every source carries the
run's id, so no test reuses another run's environment."""

from __future__ import annotations

import http.server
import ipaddress
import os
import re
import socket
import threading
import time
import uuid
from collections.abc import Iterator

import docker
import docker.errors
import pytest

from service.environments import (
    BoxFault,
    BuiltEnvironment,
    EnvironmentBuilder,
    EnvironmentBuildError,
    EnvironmentSource,
    dockerfile_source,
)
from service.environments.builder import RESUME_SUFFIX
from service.images.build_network import PROXY
from service.images.build_pen import PEN_LABEL, build_pen, pens_possible
from service.images.capped import (
    CAPPED_LABEL,
    OWNER_LABEL,
    CappedRunError,
    Caps,
    reap_capped,
    run_capped,
)
from service.images.docker_engine import DockerImageEngine
from service.owners import owner_gone
from service.settings import Settings

pytestmark = pytest.mark.docker

RUN = uuid.uuid4().hex[:10]
REPOSITORY = f"examhall-test-{RUN}/env"
DEBIAN = "examhall/debian-base:bookworm"
SECRET = f"victim-secret-{RUN}"
_LAYER = re.compile(r"^ ---> ([0-9a-f]{12,64})$", re.MULTILINE)


@pytest.fixture(scope="module")
def builder(docker_client: docker.DockerClient, sandbox_image: str) -> Iterator[EnvironmentBuilder]:
    yield EnvironmentBuilder(
        DockerImageEngine(docker_client),
        sandbox_image=sandbox_image,
        settings=Settings(debian_suite="bookworm", build_timeout_s=120),
        repository=REPOSITORY,
    )
    for image in docker_client.images.list(name=REPOSITORY):
        for tag in image.tags:
            docker_client.images.remove(tag, force=True)


@pytest.fixture(scope="module")
def tight(docker_client: docker.DockerClient, sandbox_image: str) -> EnvironmentBuilder:
    """A builder with small caps (its images land in REPOSITORY, removed with `builder`'s)."""
    return EnvironmentBuilder(
        DockerImageEngine(docker_client),
        sandbox_image=sandbox_image,
        settings=Settings(
            debian_suite="bookworm", build_timeout_s=120, build_pids=32, build_disk="64m"
        ),
        repository=REPOSITORY,
    )


def source(
    name: str, text: str, timeout_s: float | None = None, files: dict[str, bytes] | None = None
) -> EnvironmentSource:
    made = dockerfile_source(
        f"suite isolation, task {name}",
        {"Dockerfile": f"{text}\nLABEL examhall.test-run={RUN}\n".encode(), **(files or {})},
    )
    return EnvironmentSource(made.name, made.files, None, timeout_s)


@pytest.fixture(scope="module")
def victim(builder: EnvironmentBuilder) -> BuiltEnvironment:
    """Another team's environment: its secret is readable by root alone."""
    return builder.build(
        source("victim", f"FROM {DEBIAN}\nRUN echo {SECRET} > /secret && chmod 0600 /secret"),
        lambda _: None,
    )


def refused_or_blind(builder: EnvironmentBuilder, text: str) -> str:
    """Build `text`; it must fail, and nothing it printed may hold the victim's secret."""
    lines: list[str] = []
    with pytest.raises(EnvironmentBuildError) as caught:
        builder.build(source(f"attack-{uuid.uuid4().hex[:6]}", text), lines.append)
    printed = "\n".join(lines) + str(caught.value) + (caught.value.log or "")
    assert SECRET not in printed
    return printed


def test_another_teams_image_cannot_be_named_by_any_spelling(
    builder: EnvironmentBuilder, victim: BuiltEnvironment, docker_client: docker.DockerClient
) -> None:
    # Its name behind the default registry (the old check matched the raw string).
    message = refused_or_blind(builder, f"FROM docker.io/{victim.ref}\nRUN cat /secret")
    assert "not one its builds may use" in message
    # Its id, by the short prefix the old check let through, and in full.
    short = victim.digest.removeprefix("sha256:")[:8]
    for name in (short, victim.digest):
        message = refused_or_blind(
            builder, f"FROM {DEBIAN}\nCOPY --from={name} /secret /stolen\nRUN cat /stolen"
        )
        assert f"the image {name} is not present on this box or not one" in message
    # A BOM before the escape directive: Docker obeys it, so a continuation swallows the
    # next line. The engine now gets what the parser read: `RUN echo FROM victim`, then a
    # `cat` in the Debian stage, where there is no secret.
    hostile = f"\ufeff# escape=`\nFROM {DEBIAN}\nRUN echo `\nFROM {victim.ref}\nRUN cat /secret"
    message = refused_or_blind(builder, hostile)
    assert "RUN echo FROM " in message and "No such file or directory" in message


def host_only_server(address: str) -> tuple[http.server.ThreadingHTTPServer, list[str]]:
    """A listener on the host standing for what only the host should reach, and the paths
    anyone fetched from it; the caller shuts it down."""
    hits: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            hits.append(self.path)
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"host-only data")

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer((address, 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, hits


def test_add_of_a_url_is_refused_in_every_spelling_before_the_engine_fetches(
    builder: EnvironmentBuilder,
) -> None:
    server, hits = host_only_server("127.0.0.1")
    url = f"http://127.0.0.1:{server.server_address[1]}/metadata"
    try:
        for add in (
            f'ADD ["{url}", "/x"]',
            f"ADD {url} /x",
            f"add\t{url.upper()} /x",
            f"ADD {url.replace('://', chr(92) + '://')} /x",
            f"ARG U={url}\nADD $U /x",
        ):
            message = refused_or_blind(builder, f"FROM {DEBIAN}\n{add}\nRUN cat /x")
            assert "ADD takes only files of the build context" in message
        assert hits == []
    finally:
        server.shutdown()
        server.server_close()


# Run in a RUN step: the host's own bridge address directly, then through the build proxy
# (Docker hands the step its address in http_proxy) the same address and an unlisted name.
_REACH = r"""
import os, socket, sys, urllib.request
host, port = sys.argv[1], int(sys.argv[2])
try:
    socket.create_connection((host, port), timeout=3).close()
    print("direct: CONNECTED")
except OSError as exc:
    print("direct: unreachable", type(exc).__name__)
for url in (f"http://{host}:{port}/", f"http://unlisted.example:{port}/"):
    try:
        urllib.request.urlopen(url, timeout=5).read()
        print("proxied: FETCHED", url)
    except Exception as exc:
        print("proxied: refused", url, getattr(exc, "code", type(exc).__name__))
print("proxy is", "set" if os.environ.get("http_proxy") else "unset")
"""


def test_a_run_step_reaches_neither_the_host_nor_an_unlisted_host(
    builder: EnvironmentBuilder, docker_client: docker.DockerClient
) -> None:
    # The host's own listener on every address, reached as a step would on Docker's bridge.
    server, hits = host_only_server("0.0.0.0")
    bridge = docker_client.networks.get("bridge").attrs["IPAM"]["Config"][0]
    gateway = bridge.get("Gateway") or str(next(ipaddress.ip_network(bridge["Subnet"]).hosts()))
    port = server.server_address[1]
    lines: list[str] = []
    try:
        builder.build(
            source(
                "reach",
                f"FROM {DEBIAN}\nCOPY reach.py /reach.py\nRUN python3 /reach.py {gateway} {port}",
                files={"reach.py": _REACH.encode()},
            ),
            lines.append,
        )
    finally:
        server.shutdown()
        server.server_close()
    printed = "\n".join(lines)
    assert "direct: unreachable" in printed, printed
    assert f"proxied: refused http://{gateway}:{port}/ 403" in printed, printed
    assert f"proxied: refused http://unlisted.example:{port}/ 403" in printed, printed
    assert "proxy is set" in printed and "CONNECTED" not in printed and "FETCHED" not in printed
    assert hits == []


def test_a_capped_run_has_no_capabilities_network_or_room(
    docker_client: docker.DockerClient,
) -> None:
    caps = Caps(memory=64 * 1024 * 1024, pids=16, cpu_shares=512, timeout_s=60)
    script = (
        "grep CapEff /proc/self/status; echo $(ls /sys/class/net);"
        "head -c 256m /dev/zero | tail > /dev/null; echo tail=$?;"
        "for i in $(seq 40); do sleep 5 & done; echo all-forked"
    )
    ran = run_capped(docker_client, DEBIAN, ["/bin/sh", "-c", script], caps)
    assert "CapEff:\t0000000000000000" in ran.output
    assert ran.output.splitlines()[1] == "lo"  # no network but loopback
    assert "tail=137" in ran.output  # killed at the memory cap
    assert "Cannot fork" in ran.output and "all-forked" not in ran.output


def test_a_capped_run_that_hangs_ends_at_its_deadline_or_cancel(
    docker_client: docker.DockerClient,
) -> None:
    def ours() -> list[object]:
        return docker_client.containers.list(
            all=True, sparse=True, filters={"label": f"{CAPPED_LABEL}-test={RUN}"}
        )

    caps = Caps(memory=64 * 1024 * 1024, pids=16, cpu_shares=512, timeout_s=3)
    labels = {f"{CAPPED_LABEL}-test": RUN}
    started = time.monotonic()
    with pytest.raises(CappedRunError, match="ran past its 3 s"):
        run_capped(docker_client, DEBIAN, ["sleep", "infinity"], caps, labels=labels)
    assert time.monotonic() - started < 20
    assert ours() == []

    cancel = threading.Event()
    threading.Timer(1.0, cancel.set).start()
    started = time.monotonic()
    long = Caps(caps.memory, caps.pids, caps.cpu_shares, timeout_s=300)
    with pytest.raises(CappedRunError, match="cancelled"):
        run_capped(docker_client, DEBIAN, ["sleep", "infinity"], long, labels=labels, cancel=cancel)
    assert time.monotonic() - started < 20
    assert ours() == []


def test_a_probe_that_hangs_is_bounded_by_the_builds_deadline(
    builder: EnvironmentBuilder,
) -> None:
    # The task's python3 never answers: the probe that reads it is held to the build's 15 s.
    fake = "/usr/local/bin/python3"
    hang = f"FROM {DEBIAN}\nRUN printf '#!/bin/sh\\nsleep 100000\\n' > {fake} && chmod +x {fake}"
    started = time.monotonic()
    with pytest.raises(EnvironmentBuildError, match="probing the image failed: it ran past"):
        builder.build(source("hanging-python", hang, timeout_s=15), lambda _: None)
    assert time.monotonic() - started < 60


def assert_no_layer_left(error: EnvironmentBuildError, client: docker.DockerClient) -> None:
    """Every step image the failed build printed is gone (but the base it started from)."""
    base = client.images.get(DEBIAN).id.removeprefix("sha256:")
    made = [layer for layer in _LAYER.findall(error.log or "") if not base.startswith(layer)]
    assert made, error.log
    for layer in made:
        with pytest.raises(docker.errors.ImageNotFound):
            client.images.get(layer)


def test_a_failed_step_keeps_the_steps_before_it_and_a_cancelled_build_leaves_no_layer(
    builder: EnvironmentBuilder, docker_client: docker.DockerClient
) -> None:
    def tags() -> set[str]:
        return {t for i in docker_client.images.list(name=REPOSITORY) for t in i.tags}

    before = tags()  # the module's earlier attacks may have kept steps of their own
    failing = f"FROM {DEBIAN}\nRUN head -c 8m /dev/urandom > /big-{RUN}\nRUN exit 3"
    with pytest.raises(EnvironmentBuildError, match="non-zero code: 3") as caught:
        builder.build(source("fails", failing), lambda _: None)
    # The step that succeeded is kept, tagged for the next build to resume after it...
    kept = tags() - before
    resume = [t for t in kept if t.endswith(RESUME_SUFFIX)]
    assert len(resume) == 1 and kept == set(resume), kept
    assert "are kept as" in (caught.value.log or "")
    again: list[str] = []
    with pytest.raises(EnvironmentBuildError, match="non-zero code: 3"):
        builder.build(source("fails", failing), again.append)
    # ...and the next build of it starts after that step (the engine's cache), not from FROM.
    assert any("Using cache" in line for line in again), again
    # Fixed, it builds on the kept step, and the resume tag goes.
    fixed = failing.replace("RUN exit 3", "RUN true")
    built: list[str] = []
    builder.build(source("fails", fixed), built.append)
    assert any("Using cache" in line for line in built), built
    assert resume[0] in tags()  # the failing version's own tag: the image cache ages it out
    docker_client.images.remove(resume[0])

    cancel = threading.Event()
    running: list[str] = []  # cancelled in the last step, once the one before it is a layer

    def progress(line: str) -> None:
        if "RUN sleep 300" in line and not running:
            running.append(line)
            threading.Timer(1.0, cancel.set).start()

    slow = f"FROM {DEBIAN}\nRUN echo {uuid.uuid4().hex} > /mark\nRUN sleep 300"
    started = time.monotonic()
    with pytest.raises(EnvironmentBuildError, match="cancelled") as caught:
        builder.build(source("cancelled", slow), progress, cancel)
    assert time.monotonic() - started < 60
    assert_no_layer_left(caught.value, docker_client)


def test_a_gone_planes_capped_runs_are_reaped_and_a_live_ones_kept(
    docker_client: docker.DockerClient,
) -> None:
    host = socket.gethostname()
    dead = f"{host}:{2**22 + 7}:{RUN}"  # above the kernel's pid limit: never a live process
    alive = f"{host}:{os.getpid()}:{RUN}"
    caps = Caps(memory=64 * 1024 * 1024, pids=16, cpu_shares=512, timeout_s=60, owner=dead)
    # A plane that died mid-probe: its run goes on with nobody waiting for it (the thread
    # here stands for the dead plane; its wait ends once the reaper removes the container).
    ended: list[BaseException] = []

    def dead_plane() -> None:
        try:
            run_capped(docker_client, DEBIAN, ["sleep", "infinity"], caps)
        except docker.errors.DockerException as exc:
            ended.append(exc)

    left = threading.Thread(target=dead_plane, daemon=True)
    left.start()
    kept = docker_client.containers.run(
        DEBIAN, ["sleep", "infinity"], labels={OWNER_LABEL: alive}, detach=True
    )
    try:
        deadline = time.monotonic() + 30
        while not (found := owned_by(docker_client, dead)):
            assert time.monotonic() < deadline, "the capped run never started"
            time.sleep(0.1)
        assert reap_capped(docker_client, owner_gone) == found
        assert owned_by(docker_client, dead) == []
        assert owned_by(docker_client, alive) == [str(kept.id)]
    finally:
        kept.remove(force=True)
    left.join(timeout=30)
    assert ended and not left.is_alive()  # its container went under it


def owned_by(client: docker.DockerClient, owner: str) -> list[str]:
    return [
        str(c.id)
        for c in client.containers.list(
            all=True, sparse=True, filters={"label": f"{OWNER_LABEL}={owner}"}
        )
    ]


# A hundred processes at once, each in a RUN step of its own shell: under a pids cap of 32 for
# the whole build the shell cannot fork, whatever `ulimit` a root step would set itself.
FORKS = "n=0; while [ $n -lt 100 ]; do sleep 2 & n=$((n+1)); done; wait"


def test_a_builds_run_steps_share_its_pids_cap(
    builder: EnvironmentBuilder, tight: EnvironmentBuilder, docker_client: docker.DockerClient
) -> None:
    if (why := pens_possible(docker_client)) is not None:
        pytest.skip(why)
    text = f"FROM {DEBIAN}\nRUN echo {uuid.uuid4().hex} > /mark\nRUN {FORKS}"
    with pytest.raises(EnvironmentBuildError, match="non-zero code") as caught:
        tight.build(source("forks", text), lambda _: None)
    assert "Cannot fork" in (caught.value.log or "")
    # A step that failed: the one before it is kept for the next build to resume after.
    assert "are kept as" in (caught.value.log or "")
    # The same steps under the default cap build: the cap, not the step, stopped it.
    built = builder.build(source("forks-allowed", text), lambda _: None)
    assert docker_client.images.get(built.ref).id == built.digest
    # A pen holds the build's cgroup while it runs, and is gone with the build.
    with build_pen(docker_client, DEBIAN, pids=8, memory=2**26, cpu_shares=2, owner=None) as pen:
        assert pen.parent is not None and pen.container is not None
        assert pen.parent.endswith(pen.container)
        found = docker_client.containers.get(pen.container)
        assert found.labels.get(PEN_LABEL) == "1" and found.status == "running"
    with pytest.raises(docker.errors.NotFound):
        docker_client.containers.get(pen.container)


def test_a_build_that_writes_past_its_disk_cap_is_stopped_and_leaves_nothing(
    tight: EnvironmentBuilder, docker_client: docker.DockerClient
) -> None:
    mark = f"RUN echo {uuid.uuid4().hex} > /mark"
    # Caught while the step still writes, 10 MiB at a time...
    slow = "for i in $(seq 60); do head -c 10m /dev/zero > /fill-$i; sleep 0.1; done"
    started = time.monotonic()
    with pytest.raises(EnvironmentBuildError, match="more than its 64 MiB of disk") as caught:
        tight.build(source("fills-slowly", f"FROM {DEBIAN}\n{mark}\nRUN {slow}"), lambda _: None)
    assert time.monotonic() - started < 60
    assert "Raise EXAMHALL_BUILD_DISK (now 64 MiB)" in str(caught.value)
    assert_no_layer_left(caught.value, docker_client)
    # ...and by its layer when one step wrote it all at once and the next went on.
    fast = f"FROM {DEBIAN}\n{mark}\nRUN head -c 200m /dev/zero > /fill\nRUN sleep 30"
    with pytest.raises(EnvironmentBuildError, match="more than its 64 MiB of disk") as caught:
        tight.build(source("fills-at-once", fast), lambda _: None)
    assert_no_layer_left(caught.value, docker_client)


def test_a_build_proxy_cut_off_from_its_way_out_is_replaced_before_the_next_build(
    docker_client: docker.DockerClient, sandbox_image: str
) -> None:
    # As when the engine's default bridge is deleted and made again under a running proxy:
    # it keeps running with no way out. Nothing here sends a packet anywhere.
    engine = DockerImageEngine(docker_client)
    hosts = ["deb.debian.org"]
    engine.build_network(sandbox_image, hosts)
    proxy = docker_client.containers.get(PROXY)
    engine.build_network(sandbox_image, hosts)
    assert docker_client.containers.get(PROXY).id == proxy.id  # healthy: kept
    docker_client.networks.get("bridge").disconnect(proxy)
    network = engine.build_network(sandbox_image, hosts)
    replaced = docker_client.containers.get(PROXY)
    assert replaced.id != proxy.id
    with pytest.raises(docker.errors.NotFound):
        docker_client.containers.get(proxy.id)
    attached = replaced.attrs["NetworkSettings"]["Networks"]
    assert attached["bridge"]["IPAddress"] and attached[network.name]["IPAddress"]


def test_a_build_the_proxy_could_not_serve_is_the_boxs_fault_and_the_proxy_is_replaced(
    docker_client: docker.DockerClient, sandbox_image: str
) -> None:
    # An allowed host the proxy cannot reach: a container of this test's own on the bridge,
    # with nothing listening on port 80, stands for a mirror the box's network lost.
    sink = docker_client.containers.run(
        sandbox_image,
        entrypoint=["sleep", "300"],
        detach=True,
        labels={"examhall.test-run": RUN},
        network_mode="bridge",
    )
    try:
        sink.reload()
        address = sink.attrs["NetworkSettings"]["Networks"]["bridge"]["IPAddress"]
        builder = EnvironmentBuilder(
            DockerImageEngine(docker_client),
            sandbox_image=sandbox_image,
            settings=Settings(
                debian_suite="bookworm", build_timeout_s=120, build_egress=f"{address}:80"
            ),
            repository=REPOSITORY,
        )
        fetch = f"import urllib.request; urllib.request.urlopen('http://{address}/', timeout=20)"
        lines: list[str] = []
        with pytest.raises(BoxFault) as caught:
            builder.build(source("unreachable", f"FROM {DEBIAN}\nRUN python3 -c \"{fetch}\""),
                          lines.append)  # fmt: skip
        left = docker_client.containers.list(all=True, filters={"name": f"^{PROXY}$"})
        assert left == [], "the proxy that failed is gone; the next build makes a new one"
        message = str(caught.value)
        assert f"could not reach {address}:80" in message, message
        assert "a fault of the box and not of the environment" in message
        assert any("502" in line for line in lines), lines
    finally:
        sink.remove(force=True)
