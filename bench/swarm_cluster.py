"""What the test swarm (tests/swarm/cluster.py) costs: building its images, starting it,
pushing the sandbox image to it, a node joining later, tearing it down, and each node's memory.

    PYTHONPATH=. python3 bench/swarm_cluster.py [--nodes 3] [--starts 3] [--rebuild]

--rebuild builds the node and registry images again without the layer cache (apt included),
to time a first run; without it the cached images are reused, as every later run does.
Memory is each node container's usage less page cache: idle (its engine alone) and with one
sandbox task running on it.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

import docker
from _common import median, table, write_json
from docker.types import ServiceMode

from service.images.sandbox_image import ensure_sandbox_image
from tests.swarm.cluster import (
    Cluster,
    ensure_node_image,
    ensure_registry_image,
    reap_orphans,
)

MIB = 1024 * 1024


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _quiet(_: str) -> None:
    pass


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, default=3, help="nodes per cluster (default 3)")
    parser.add_argument("--starts", type=int, default=3, help="cluster starts timed (default 3)")
    parser.add_argument("--rebuild", action="store_true", help="time uncached image builds")
    parser.add_argument("--json", help="output file (default bench/results/swarm_cluster.json)")
    args = parser.parse_args()

    client = docker.from_env()
    reap_orphans(client)
    results: dict[str, Any] = {"nodes": args.nodes}

    started = time.monotonic()
    ensure_node_image(client, _quiet, force=args.rebuild)
    results["node_image_s"] = time.monotonic() - started
    started = time.monotonic()
    # The box's registry recipe (docker/registry/) is cached by its hash; --rebuild is the node's.
    ensure_registry_image(client, _quiet)
    results["registry_image_s"] = time.monotonic() - started
    results["images_rebuilt"] = args.rebuild
    sandbox = ensure_sandbox_image(client, progress=_stderr)

    starts: list[float] = []
    teardowns: list[float] = []
    for attempt in range(args.starts):
        started = time.monotonic()
        cluster = Cluster.start(client, nodes=args.nodes, progress=_stderr)
        starts.append(time.monotonic() - started)
        try:
            if attempt == 0:
                results.update(_measure_cluster(cluster, client, sandbox))
        finally:
            started = time.monotonic()
            cluster.teardown()
            teardowns.append(time.monotonic() - started)
    results["start_s"] = starts
    results["teardown_s"] = teardowns

    print(
        table(
            ["what", "seconds"],
            [
                [
                    "node image" + (" (uncached build)" if args.rebuild else " (cached)"),
                    round(results["node_image_s"], 1),
                ],
                [
                    "registry image" + (" (uncached build)" if args.rebuild else " (cached)"),
                    round(results["registry_image_s"], 1),
                ],
                [
                    f"cluster start, {args.nodes} nodes (median of {len(starts)})",
                    round(median(starts) or 0, 1),
                ],
                ["push sandbox image (fresh registry)", round(results["push_s"], 1)],
                ["first task on every node (pull included)", round(results["global_task_s"], 1)],
                ["add_node (join, ready)", round(results["add_node_s"], 1)],
                ["teardown (median)", round(median(teardowns) or 0, 1)],
            ],
        )
    )
    print()
    print(
        table(
            ["node", "idle MiB", "with a task MiB"],
            [
                [name, round(idle / MIB), round(results["memory_busy"][name] / MIB)]
                for name, idle in results["memory_idle"].items()
            ],
        )
    )
    write_json("swarm_cluster", results, args.json)
    return 0


def _measure_cluster(cluster: Cluster, client: docker.DockerClient, sandbox: str) -> dict[str, Any]:
    measured: dict[str, Any] = {"phases_s": cluster.timings}
    time.sleep(5)  # let the engines settle after joining before reading their memory
    measured["memory_idle"] = cluster.memory_usage()

    started = time.monotonic()
    ref = cluster.push(client, sandbox)
    measured["push_s"] = time.monotonic() - started

    started = time.monotonic()
    service = cluster.manager.services.create(
        ref,
        name="bench-global",
        command=["python3", "-c", "import time; time.sleep(3600)"],
        mode=ServiceMode("global"),
    )
    _wait_running(service, len(cluster.nodes))
    measured["global_task_s"] = time.monotonic() - started
    measured["memory_busy"] = cluster.memory_usage()

    started = time.monotonic()
    cluster.add_node()
    measured["add_node_s"] = time.monotonic() - started
    return measured


def _wait_running(service: Any, count: int, timeout: float = 180.0) -> None:
    deadline = time.monotonic() + timeout
    while sum(t["Status"]["State"] == "running" for t in service.tasks()) < count:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{service.name}: {count} tasks were not running in {timeout} s")
        time.sleep(0.25)


if __name__ == "__main__":
    sys.exit(main())
