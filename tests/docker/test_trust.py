"""The operator's certificate authorities (EXAMHALL_CA_BUNDLE), as a box behind a
TLS-inspecting proxy needs them: a task environment's build step, its agent and its verifier
all trust a server whose certificate a test authority signed, and without the setting the
same build does not. Every connection is to a server on the container's own loopback."""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest

from service.backends.docker import DockerBackend
from service.environments import (
    EnvironmentBuilder,
    EnvironmentBuildError,
    EnvironmentSource,
    dockerfile_source,
)
from service.images.docker_engine import DockerImageEngine
from service.settings import Settings
from tests.task_trials import task_trial

pytestmark = pytest.mark.docker

RUN = uuid.uuid4().hex[:10]
REPOSITORY = f"examhall-test-{RUN}/env"
DEBIAN = "examhall/debian-base:bookworm"
# Serves once on loopback with the test authority's certificate for localhost, and fetches
# from itself with Python's default trust (no proxy: the build's would refuse loopback).
CHECK = """
import http.server, ssl, sys, threading, urllib.request
tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
tls.load_cert_chain("/srv/tls/server.pem", "/srv/tls/server.key")
server = http.server.HTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)
server.socket = tls.wrap_socket(server.socket, server_side=True)
threading.Thread(target=server.serve_forever, daemon=True).start()
opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
try:
    opener.open(f"https://localhost:{server.server_address[1]}/", timeout=10)
except urllib.error.HTTPError:
    print("TRUSTED")  # the handshake held: the server answered (501, it serves nothing)
except Exception as exc:
    print("UNTRUSTED", exc)
    sys.exit(1)
else:
    print("TRUSTED")
"""


@pytest.fixture(scope="module")
def authority(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A test CA (ca.pem) and a certificate it signed for localhost (server.pem, .key)."""
    root = tmp_path_factory.mktemp("ca")

    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=root, check=True, capture_output=True)

    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out",
            "ca.pem", "-days", "2", "-subj", "/CN=examhall test authority")  # fmt: skip
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key", "-out",
            "server.csr", "-subj", "/CN=localhost")  # fmt: skip
    (root / "san.cnf").write_text("subjectAltName=DNS:localhost\n")
    openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
            "-CAcreateserial", "-out", "server.pem", "-days", "2",
            "-extfile", "san.cnf")  # fmt: skip
    return root


@pytest.fixture(scope="module")
def cleanup(docker_client: docker.DockerClient) -> Iterator[None]:
    yield
    for repository in (REPOSITORY, f"{REPOSITORY}-trusting"):
        for image in docker_client.images.list(name=repository):
            for tag in image.tags:
                docker_client.images.remove(tag, force=True)


def builder(
    client: docker.DockerClient, sandbox_image: str, **settings: object
) -> EnvironmentBuilder:
    return EnvironmentBuilder(
        DockerImageEngine(client),
        sandbox_image=sandbox_image,
        settings=Settings(debian_suite="bookworm", **settings),  # type: ignore[arg-type]
        repository=REPOSITORY,
    )


def checked_source(authority: Path) -> EnvironmentSource:
    dockerfile = (
        f"FROM {DEBIAN}\nCOPY server.pem server.key /srv/tls/\nCOPY check.py /srv/check.py\n"
        f"RUN python3 /srv/check.py\nWORKDIR /app\nLABEL examhall.test-run={RUN}\n"
    )
    return dockerfile_source(
        "suite trust, task tls",
        {
            "Dockerfile": dockerfile.encode(),
            "server.pem": (authority / "server.pem").read_bytes(),
            "server.key": (authority / "server.key").read_bytes(),
            "check.py": CHECK.encode(),
        },
    )


def test_builds_agents_and_verifiers_trust_the_operators_authorities(
    docker_client: docker.DockerClient,
    sandbox_image: str,
    backend: DockerBackend,
    authority: Path,
    cleanup: None,
) -> None:
    source = checked_source(authority)
    # Without the setting the build's own check fails: the authority is no one's.
    with pytest.raises(EnvironmentBuildError) as untrusted:
        builder(docker_client, sandbox_image).build(source, lambda _: None)
    assert "UNTRUSTED" in str(untrusted.value), str(untrusted.value)

    trusting = builder(docker_client, sandbox_image, ca_bundle=str(authority / "ca.pem"))
    env = trusting.build(source, lambda _: None)

    # The oracle's run is the agent's: its tools trust the authority as the verifier does.
    solve = "python3 /srv/check.py > /app/answer.txt\n"
    test = (
        "python3 /srv/check.py && grep -q TRUSTED /app/answer.txt"
        " && echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt\n"
    )
    record = task_trial(
        backend, env.ref, test=test, solve=solve, agent="oracle", verifier_timeout_s=30
    )
    log = record.artifacts.get("verifier.log", b"").decode()
    assert record.result.outcome == "passed", (record.result, log)
    assert "TRUSTED" in log, log
