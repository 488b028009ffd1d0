"""A trial's egress throughput: a 50 MB download through the control plane's connection (the
sandbox's proxy front, base64 lines on the channel, the control plane's socket) beside the
same download straight from the host, from one loopback server, side by side.

    python3 bench/egress.py [--repeats 5] [--mb 50]

Side A is the host's own `urllib` fetch of http://127.0.0.2:PORT/blob (no proxy). Side B is
a task trial under an egress policy naming that server, whose oracle's solve.sh makes the
same fetch through `http_proxy` and prints the seconds it took (the trial's start and its
verifier are not counted). The sides alternate.
"""

from __future__ import annotations

import argparse
import base64
import http.server
import io
import re
import tarfile
import threading
import time
import urllib.request
import uuid

import docker
from _common import interleave, median, sandbox_image, table, write_json

from sandbox.protocol import Limits, ModelRef, RunSpec, SuiteBundle, TaskSpec
from service.backends.docker import DockerBackend, DockerSettings
from service.domain.egress import parse_policies
from service.launch.egress import TrialEgress
from service.launch.launcher import Launcher
from service.launch.trial import Placement, run_trial

FETCH = """
import time, urllib.request
started = time.perf_counter()
size = len(urllib.request.urlopen({url!r}, timeout=600).read())
print("FETCHED", size, time.perf_counter() - started)
"""


def serve(blob: bytes) -> http.server.ThreadingHTTPServer:
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Length", str(len(blob)))
            self.end_headers()
            self.wfile.write(blob)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.2", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def task_image(client: docker.DockerClient, sandbox: str) -> str:
    dockerfile = f"FROM {sandbox}\nRUN mkdir -p /tests /logs /solution\n".encode()
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        info = tarfile.TarInfo("Dockerfile")
        info.size = len(dockerfile)
        tar.addfile(info, io.BytesIO(dockerfile))
    tag = f"examhall-bench/egress:{uuid.uuid4().hex[:12]}"
    client.images.build(fileobj=io.BytesIO(buffer.getvalue()), custom_context=True, tag=tag)
    return tag


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=5, help="downloads per side (default 5)")
    parser.add_argument("--mb", type=int, default=50, help="the download's size in MB")
    parser.add_argument("--json", help="output file (default bench/results/egress.json)")
    args = parser.parse_args()

    size = args.mb * 1000 * 1000
    server = serve(b"x" * size)
    port = server.server_address[1]
    url = f"http://127.0.0.2:{port}/blob"
    sandbox = sandbox_image()
    client = docker.from_env()
    image = task_image(client, sandbox)
    launcher = Launcher(DockerBackend(DockerSettings(image=sandbox)))
    policy = parse_policies(f"bench=127.0.0.2:{port}")["bench"]
    egress = TrialEgress(policy, None, max_bytes=4 * size)
    program = base64.b64encode(FETCH.format(url=url).encode()).decode()

    def direct() -> float:
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        started = time.perf_counter()
        assert len(opener.open(url, timeout=600).read()) == size
        return time.perf_counter() - started

    def through_egress() -> float:
        def files(**texts: str) -> dict[str, str]:
            return {k: base64.b64encode(v.encode()).decode() for k, v in texts.items()}

        task = TaskSpec(
            name="fetch",
            instruction="Fetch.",
            tests=files(**{"test.sh": "echo 1 > /logs/verifier/reward.txt\n"}),
            solution=files(**{"solve.sh": f"echo {program} | base64 -d | python3\n"}),
            workdir="/workspace",
            agent="oracle",
            egress=True,
        )
        spec = RunSpec(
            trial_id=f"bench-{uuid.uuid4().hex[:12]}",
            suite=SuiteBundle("tasks", ""),
            case_id="fetch",
            model=ModelRef.parse("simulated/coin?p=1"),
            limits=Limits(agent_timeout_s=600),
            task=task,
        )
        record = run_trial(
            launcher,
            spec,
            job_id="bench",
            deadline_s=900,
            placement=Placement(image=image),
            egress=egress,
        )
        out = record.artifacts.get("agent.stdout", b"").decode(errors="replace")
        found = re.search(r"FETCHED (\d+) ([0-9.]+)", out)
        assert found and int(found[1]) == size, (record.result, out[-500:])
        return float(found[2])

    try:
        samples = interleave({"direct": direct, "egress": through_egress}, args.repeats, warmup=1)
    finally:
        client.images.remove(image, force=True)
        server.shutdown()
    rows = []
    result: dict[str, dict[str, float | None]] = {}
    for name, times in samples.items():
        seconds = median(times)
        rate = size / seconds / 1e6 if seconds else None
        result[name] = {"median_s": seconds, "mb_per_s": rate}
        rows.append([name, seconds, rate])
    ratio = (result["egress"]["median_s"] or 0) / (result["direct"]["median_s"] or 1)
    print(table(["side", "median s", "MB/s"], rows))
    print(f"egress / direct: {ratio:.1f}x the time for {args.mb} MB")
    write_json(
        "egress",
        {"mb": args.mb, "repeats": args.repeats, "sides": result, "ratio": ratio},
        args.json,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
