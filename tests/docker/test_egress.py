"""A task's egress on the real engine: the sandbox keeps no network, and a trial under an egress
policy reaches the policy's hosts through the control plane alone (service/launch/egress.py,
sandbox/egress.py), each connection an event, its bytes capped.

The upstreams are this test's own HTTP servers on loopback: 127.0.0.2 in the policy,
127.0.0.3 outside it (both loopback on Linux, and neither in the sandbox's `no_proxy`)."""

from __future__ import annotations

import base64
import http.server
import re
import socket
import struct
import threading
import time
import uuid
from collections.abc import Callable, Iterator

import docker
import pytest

from service.backends.docker import DockerBackend
from service.domain.egress import parse_policies
from service.launch.egress import TrialEgress
from service.launch.trial import TrialRecord
from tests.docker.conftest import Server
from tests.docker.test_task_suites import tar_of, upload
from tests.docker.test_task_verifier import task_image
from tests.task_trials import task_trial

pytestmark = pytest.mark.docker

__all__ = ["task_image"]  # the sandbox image with a task's mount points, shared

BIG = 2 * 1024 * 1024


class Upstream(http.server.ThreadingHTTPServer):
    """Serves /file (a token), /big (BIG bytes) and /cut (half of BIG bytes, then a reset
    where the rest should be), and remembers every path asked for."""

    def __init__(self, address: str) -> None:
        self.token = f"egress-{uuid.uuid4().hex}".encode()
        self.paths: list[str] = []
        upstream = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                upstream.paths.append(self.path)
                body = upstream.token if self.path == "/file" else b"x" * BIG
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if self.path != "/cut":
                    self.wfile.write(body)
                    return
                self.wfile.write(body[: BIG // 2])
                time.sleep(0.5)  # taken in by the control plane before the reset
                # Linger 0: the close resets the connection rather than ending it.
                self.connection.setsockopt(
                    socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)
                )
                self.connection.close()
                self.close_connection = True

            def log_message(self, *args: object) -> None:
                pass

        super().__init__((address, 0), Handler)
        self.port = self.server_address[1]
        threading.Thread(target=self.serve_forever, daemon=True).start()


@pytest.fixture
def allowed() -> Iterator[Upstream]:
    server = Upstream("127.0.0.2")
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture
def outside() -> Iterator[Upstream]:
    server = Upstream("127.0.0.3")
    yield server
    server.shutdown()
    server.server_close()


def fetch(url: str, out: str) -> str:
    """A line of shell: python3 fetches `url` (through http_proxy, when it is set) to `out`,
    or writes why not."""
    program = (
        "import sys, urllib.request\n"
        "try:\n"
        f"    data = urllib.request.urlopen({url!r}, timeout=30).read()\n"
        "except Exception as exc:\n"
        "    data = repr(exc).encode()\n"
        f"open({out!r}, 'wb').write(data)\n"
    )
    return f"echo {base64.b64encode(program.encode()).decode()} | base64 -d | python3\n"


def tunnel(host: str, port: int, out: str) -> str:
    """A line of shell: python3 asks the proxy for a CONNECT tunnel to host:port and speaks
    plain HTTP through it."""
    program = (
        "import http.client, os, urllib.parse\n"
        "proxy = urllib.parse.urlsplit(os.environ['https_proxy'])\n"
        "c = http.client.HTTPConnection(proxy.hostname, proxy.port, timeout=30)\n"
        f"c.set_tunnel({host!r}, {port})\n"
        "c.request('GET', '/file')\n"
        f"open({out!r}, 'wb').write(c.getresponse().read())\n"
    )
    return f"echo {base64.b64encode(program.encode()).decode()} | base64 -d | python3\n"


def check(token: bytes, *paths: str) -> str:
    """tests/test.sh: reward 1 when every file holds the token."""
    tests = " && ".join(f'[ "$(cat {path} 2>&1)" = "{token.decode()}" ]' for path in paths)
    return f"if {tests}; then echo 1; else echo 0; fi > /logs/verifier/reward.txt\n"


def run(
    backend: DockerBackend,
    image: str,
    *,
    solve: str,
    test: str,
    egress: TrialEgress | None,
) -> TrialRecord:
    return task_trial(
        backend,
        image,
        test=test,
        solve=solve,
        deadline_s=150,
        egress=egress,
        verifier_timeout_s=60,
        workdir="/workspace",
        agent="oracle",
    )


def fetched(
    backend: DockerBackend, image: str, url: str, expected: Upstream, allowed: Upstream
) -> TrialRecord:
    """A trial under a policy naming `allowed` alone: the agent fetches `url` to answer.txt
    and prints it, and passes when it holds `expected`'s token."""
    return run(
        backend,
        image,
        solve=fetch(url, "answer.txt") + "cat answer.txt\n",
        test=check(expected.token, "answer.txt"),
        egress=policy(f"127.0.0.2:{allowed.port}"),
    )


def policy(*entries: str, max_bytes: int = 64 * 1024 * 1024) -> TrialEgress:
    found = parse_policies(f"test={','.join(entries)}")["test"]
    return TrialEgress(found, None, max_bytes)


def told(record: TrialRecord) -> str:
    """What a failed assertion shows: the result, the egress events and the logs."""
    logs = {
        name: record.artifacts[name][-2000:].decode(errors="replace")
        for name in ("agent.stdout", "agent.stderr", "verifier.log")
        if name in record.artifacts
    }
    return f"{record.result}\n{egress_events(record)}\n{logs}"


def egress_events(record: TrialRecord) -> list[str]:
    return [
        str(getattr(event, "detail", ""))
        for event in record.events
        if getattr(event, "step", None) == "egress"
    ]


def test_an_allowed_host_is_reached_through_the_control_plane_by_agent_and_verifier(
    backend: DockerBackend, task_image: str, allowed: Upstream
) -> None:
    url = f"http://127.0.0.2:{allowed.port}/file"
    solve = fetch(url, "plain.txt") + tunnel("127.0.0.2", allowed.port, "tunneled.txt")
    # The verifier fetches too, through a front of its own.
    test = fetch(url, "/tmp/verifier.txt") + check(
        allowed.token, "plain.txt", "tunneled.txt", "/tmp/verifier.txt"
    )
    record = run(
        backend,
        task_image,
        solve=solve,
        test=test,
        egress=policy(f"127.0.0.2:{allowed.port}"),
    )
    assert record.result.outcome == "passed", told(record)
    assert allowed.paths.count("/file") == 3, allowed.paths
    recorded = egress_events(record)
    where = f"127.0.0.2:{allowed.port} allowed"
    assert sum(line.startswith(f"agent {where}") for line in recorded) == 2, recorded
    assert sum(line.startswith(f"verifier {where}") for line in recorded) == 1, recorded
    assert all(" bytes out, " in line for line in recorded)


def test_a_host_outside_the_policy_is_refused_and_recorded(
    backend: DockerBackend, task_image: str, allowed: Upstream, outside: Upstream
) -> None:
    record = fetched(backend, task_image, f"http://127.0.0.3:{outside.port}/file", outside, allowed)
    assert record.result.outcome == "failed", record.result
    assert outside.paths == [] and allowed.paths == []
    (line,) = egress_events(record)
    assert line.startswith(f"agent 127.0.0.3:{outside.port} refused: "), line
    assert line.endswith("0 bytes out, 0 in"), line


def test_the_byte_cap_ends_the_trial_as_limit_exceeded(
    backend: DockerBackend, task_image: str, allowed: Upstream
) -> None:
    solve = fetch(f"http://127.0.0.2:{allowed.port}/big", "big.bin")
    record = run(
        backend,
        task_image,
        solve=solve,
        test="echo 1 > /logs/verifier/reward.txt\n",
        egress=policy(f"127.0.0.2:{allowed.port}", max_bytes=BIG // 2),
    )
    result = record.result
    assert (result.outcome, result.error_kind) == ("error", "limit_exceeded"), result
    assert "egress_bytes" in result.limits_hit
    assert f"more than its {BIG // 2} bytes" in (result.error_message or "")
    # The connection the cap cut is recorded, by the control plane that cut it: the sandbox
    # was stopped before it could say anything.
    (line,) = egress_events(record)
    assert line.startswith(f"agent 127.0.0.2:{allowed.port} allowed, "), line
    assert line.endswith(f"cut: the trial passed its byte cap ({BIG // 2} bytes)"), line
    received = int(re.search(r"bytes out, (\d+) in", line).group(1))  # type: ignore[union-attr]
    assert received > BIG // 2, line


def test_an_upstream_that_breaks_off_mid_body_fails_the_trial_and_is_recorded(
    backend: DockerBackend, task_image: str, allowed: Upstream
) -> None:
    record = fetched(backend, task_image, f"http://127.0.0.2:{allowed.port}/cut", allowed, allowed)
    # Scored as the agent's failure (its download broke), not an error of the plane's.
    assert (record.result.outcome, record.result.error_kind) == ("failed", None), told(record)
    assert "IncompleteRead" in record.artifacts["agent.stdout"].decode(), told(record)
    assert allowed.paths == ["/cut"]
    (line,) = egress_events(record)
    assert line.startswith(f"agent 127.0.0.2:{allowed.port} allowed, "), line
    assert line.endswith("cut: the upstream broke off ([Errno 104] Connection reset by peer)")
    received = int(re.search(r"bytes out, (\d+) in", line).group(1))  # type: ignore[union-attr]
    assert 0 < received < BIG, line


def test_offline_nothing_leaves(backend: DockerBackend, task_image: str, allowed: Upstream) -> None:
    solve = fetch(f"http://127.0.0.2:{allowed.port}/file", "answer.txt")
    record = run(
        backend,
        task_image,
        solve=solve,
        test=check(allowed.token, "answer.txt"),
        egress=None,
    )
    assert record.result.outcome == "failed", record.result
    assert allowed.paths == []
    assert egress_events(record) == []


def test_a_job_picks_a_policy_and_its_report_says_what_each_task_ran_under(
    start_server: Callable[..., Server],
    sandbox_image: str,
    allowed: Upstream,
    monkeypatch: pytest.MonkeyPatch,
    docker_client: docker.DockerClient,
) -> None:
    monkeypatch.setenv("EXAMHALL_EGRESS_POLICIES", f"local=127.0.0.2:{allowed.port}")
    server = start_server()
    name = f"fetch-{uuid.uuid4().hex[:8]}"
    files = {
        f"{name}/task.toml": b"[environment]\nallow_internet = true\n",
        f"{name}/instruction.md": b"Fetch the file.",
        f"{name}/environment/Dockerfile": f"FROM {sandbox_image}\n".encode(),
        f"{name}/solution/solve.sh": fetch(
            f"http://127.0.0.2:{allowed.port}/file", "answer.txt"
        ).encode(),
        f"{name}/tests/test.sh": check(allowed.token, "answer.txt").encode(),
    }
    suite = upload(server, files, "egress")
    oracle = {"oracle": {"agent": "oracle"}}
    refused = server.http.post("/v1/jobs", json={"suite": suite, "variants": oracle, "egress": "x"})
    assert refused.status_code == 422, refused.text
    assert "no egress policy 'x'; it has local, offline" in refused.text
    # A team the operator gave no policy but offline may not name one.
    team = server.as_team(server.team_token(f"offline-{uuid.uuid4().hex[:6]}", egress=[]))
    own = team.post(
        "/v1/suites?name=egress",
        content=tar_of(files),
        headers={"Content-Type": "application/gzip"},
    ).json()["id"]
    body = {"suite": own, "variants": oracle, "egress": "local"}
    kept_out = team.post("/v1/jobs", json=body)
    team.close()
    assert kept_out.status_code == 422, kept_out.text
    assert "may not use egress policy 'local'; it may use none (and offline)" in kept_out.text

    online = server.wait(server.submit(suite=suite, variants=oracle, egress="local")["id"])
    offline = server.wait(server.submit(suite=suite, variants=oracle)["id"])
    outcomes, images = {}, set()
    for job in (online, offline):
        (trial,) = server.http.get(f"/v1/jobs/{job['id']}/trials").json()
        outcomes[job["id"]] = trial["outcome"]
        images.add(trial["image"])
    for image in images:  # the task's environment, this test's alone
        docker_client.images.remove(image)
    assert outcomes == {online["id"]: "passed", offline["id"]: "failed"}, outcomes
    assert allowed.paths == ["/file"]  # the offline job's trial reached nothing
    for job, ran in ((online, "local"), (offline, "offline")):
        record = server.http.get(f"/v1/jobs/{job['id']}/report").json()["record"]
        assert record["networks"] == [{"case": name, "wanted": "public", "ran": ran}]
