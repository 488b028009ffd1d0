"""The Swarm backend against the Docker backend: a trivial trial's cost, and a job's throughput
spread over three nodes against one.

    PYTHONPATH=. python3 bench/swarm.py [--trials 30] [--rounds 15]

It starts a three-node test swarm (tests/swarm/cluster.py: nested engines on this one host).

Overhead, sides interleaved (A B C A B C ...), each the real launch path (`run_trial`) on the
smoke suite's `create-greeting` with the simulated model at p=1:
- swarm: the Swarm backend, the trial a service Swarm places on one of the three nodes;
- docker on node-1: the Docker backend on node-1's own engine, the same nested engine and
  image the swarm runs on: the like-for-like floor, so the ratio is Swarm's own cost;
- docker on the host: the Docker backend on this machine's engine, as examhall runs by default.

Throughput: a job of the smoke suite x ROUNDS through a real control plane on the Swarm
backend, once with all three nodes active (6 trials at once) and once with two drained
(2 at once), timed from the POST to the job's end.
"""

from __future__ import annotations

import argparse
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import docker
from _common import interleave, median, sandbox_image, table, write_json

from sandbox.protocol import ModelRef, RunSpec
from service.backends.docker import DockerBackend, DockerSettings
from service.launch.launcher import Launcher
from service.launch.trial import run_trial
from service.suites.python import load_suite
from tests.docker.conftest import serve
from tests.swarm.backends import swarm_backend
from tests.swarm.cluster import Cluster, reap_orphans

TARGET_RATIO = 1.5


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def overhead(
    cluster: Cluster, host: docker.DockerClient, image: str, trials: int
) -> dict[str, Any]:
    swarm = swarm_backend(cluster, host, image)
    node = cluster.nodes[0]
    node.client.images.pull(swarm.image)  # the same image, by digest, on node-1's engine
    on_node = DockerBackend(
        DockerSettings(image=swarm.image, scope=f"bench-{uuid.uuid4().hex[:8]}"), node.client
    )
    on_host = DockerBackend(DockerSettings(image=image))
    suite = load_suite("smoke")
    breakdowns: list[dict[str, float]] = []

    def trial(launcher: Launcher, keep: bool = False) -> float:
        spec = RunSpec(
            trial_id=f"bench-{uuid.uuid4().hex[:12]}",
            suite=suite,
            case_id="create-greeting",
            model=ModelRef("simulated", "coin?p=1"),
        )
        started = time.perf_counter()
        record = run_trial(launcher, spec, job_id="bench", deadline_s=120)
        wall = time.perf_counter() - started
        if record.result.outcome != "passed":
            raise SystemExit(f"the trivial trial did not pass: {record.result}")
        if keep and record.sandbox is not None:
            breakdowns.append(dict(record.sandbox.timings))
        return wall

    swarm_launcher, node_launcher, host_launcher = (
        Launcher(swarm),
        Launcher(on_node),
        Launcher(on_host),
    )
    sides = {
        "swarm (3 nodes)": lambda: trial(swarm_launcher, keep=True),
        "docker on node-1": lambda: trial(node_launcher),
        "docker on the host": lambda: trial(host_launcher),
    }
    print(f"{trials} trials per side, interleaved")
    samples = interleave(sides, trials)
    medians = {name: median(values) or 0.0 for name, values in samples.items()}
    ratio = medians["swarm (3 nodes)"] / medians["docker on node-1"]
    print(
        table(
            ["side", "median s", "min s", "max s"],
            [[n, medians[n], min(v), max(v)] for n, v in samples.items()],
        )
    )
    print(f"\nswarm / docker on the same engine: {ratio:.2f}x (target <= {TARGET_RATIO}x)")
    versus_host = medians["swarm (3 nodes)"] / medians["docker on the host"]
    print(f"swarm / docker on the host: {versus_host:.2f}x")
    keys = sorted({k for b in breakdowns for k in b})
    breakdown = {k: median([b[k] for b in breakdowns if k in b]) for k in keys}
    print(table(["swarm phase", "median s"], [[k, v] for k, v in breakdown.items()]))
    return {
        "median_s": medians,
        "ratio_vs_same_engine": ratio,
        "ratio_vs_host": versus_host,
        "target_ratio": TARGET_RATIO,
        "met": ratio <= TARGET_RATIO,
        "swarm_breakdown_median_s": breakdown,
        "samples_s": samples,
    }


def throughput(
    cluster: Cluster, host: docker.DockerClient, image: str, rounds: int, tmp: Path
) -> dict[str, Any]:
    backend = swarm_backend(cluster, host, image)
    results: dict[str, Any] = {}
    for label, active, concurrency in (
        ("3 nodes", 3, 6),
        ("1 node", 1, 2),
        ("3 nodes again", 3, 6),
    ):
        drained = [n.name for n in cluster.nodes[active:]]
        for name in drained:
            cluster.drain(name)
        server = serve(
            f"sqlite:///{tmp / f'{uuid.uuid4().hex}.db'}",
            max_containers=concurrency,
            make_backend=lambda: backend,
        )
        try:
            started = time.perf_counter()
            created = server.submit(
                suite="smoke", model={"provider": "simulated", "id": "coin?p=1"}, rounds=rounds
            )
            server.wait(created["id"], timeout=1800)
            elapsed = time.perf_counter() - started
            trials = server.http.get(f"/v1/jobs/{created['id']}/trials").json()
        finally:
            server.stop()
            for name in drained:
                cluster.activate(name)
        passed = sum(t["outcome"] == "passed" for t in trials)
        per_node: dict[str, int] = {}
        for t in trials:
            per_node[t["node"]] = per_node.get(t["node"], 0) + 1
        results[label] = {
            "trials": len(trials),
            "passed": passed,
            "concurrency": concurrency,
            "seconds": elapsed,
            "trials_per_minute": 60 * len(trials) / elapsed,
            "per_node": per_node,
        }
        print(
            f"{label}: {len(trials)} trials ({passed} passed) in {elapsed:.1f} s = "
            f"{60 * len(trials) / elapsed:.1f}/min, concurrency {concurrency}, {per_node}"
        )
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trials", type=int, default=30, help="overhead trials per side")
    parser.add_argument("--rounds", type=int, default=15, help="rounds of the throughput job")
    parser.add_argument("--json", help="output file (default bench/results/swarm.json)")
    args = parser.parse_args()
    host = docker.from_env()
    image = sandbox_image()
    reap_orphans(host)
    cluster = Cluster.start(host, nodes=3, progress=_stderr)
    try:
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:
            result = {
                "overhead": overhead(cluster, host, image, args.trials),
                "throughput": throughput(cluster, host, image, args.rounds, Path(tmp)),
            }
    finally:
        cluster.teardown()
    write_json("swarm", {"image": image, **result}, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
