"""A soak on several boxes (issue 30): thousands of trials through a real control plane on a
three-node test swarm, with one node killed and another drained (then made active again)
along the way; then every trial is checked scored exactly once and nothing left behind.

    PYTHONPATH=. python3 bench/soak.py [--trials 5000] [--slots 6] [--pool 2] [--postgres URL]

The swarm is tests/swarm/cluster.py's (nested engines on this host); the job is the smoke
suite's four cases in two variants of the simulated model at p=1 (a job has at most 1,000
rounds), so every trial that runs to its end passes. At a
quarter of the trials finished node-3 is killed (SIGKILL to its engine and every sandbox on
it: its trials are lost, recorded as infra errors and run again elsewhere), at a half node-2
is drained (its running trials are let finish; Swarm places nothing new there), and at three
quarters node-2 is made active again. Checked at the end, against the store and the swarm:

- the job finished, and each (variant, case, round) has exactly one scored attempt, which
  passed;
- every other attempt is an infra error (a lost sandbox), each followed by a new attempt;
- the job's kept counts equal its trials counted afresh;
- no service, network, container or volume of the run is left on the swarm once the plane
  stopped (its warm pool's included).

Progress is printed every 30 s; the figures go to bench/results/soak.json.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import docker

from bench._common import sandbox_image, write_json
from service.store import counts
from service.store.db import make_engine, session_factory
from tests.docker.conftest import Server, serve
from tests.swarm.backends import leftovers, swarm_backend
from tests.swarm.cluster import Cluster, reap_orphans

PROGRESS_S = 30.0


def _job(server: Server, job_id: str) -> dict[str, Any]:
    job: dict[str, Any] = server.http.get(f"/v1/jobs/{job_id}").json()
    return job


def _trials(server: Server, job_id: str) -> list[dict[str, Any]]:
    trials: list[dict[str, Any]] = server.http.get(f"/v1/jobs/{job_id}/trials").json()
    return trials


def run(args: argparse.Namespace, cluster: Cluster, host: docker.DockerClient) -> dict[str, Any]:
    image = sandbox_image()
    backend = swarm_backend(cluster, host, image, pool_size=args.pool)
    # The smoke suite's four cases in two variants of the same model (a job's rounds are
    # capped at 1,000).
    rounds = max(1, args.trials // 8)
    model = {"provider": "simulated", "id": "coin?p=1"}
    events: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="examhall-soak-") as scratch:
        url = args.postgres or f"sqlite:///{scratch}/soak.db"
        server = serve(url, max_containers=args.slots, make_backend=lambda: backend)
        started = time.monotonic()

        def mark(what: str) -> None:
            events.append({"at_s": round(time.monotonic() - started, 1), "event": what})
            print(f"[{time.monotonic() - started:7.1f} s] {what}", flush=True)

        try:
            created = server.submit(
                suite="smoke",
                variants={"a": {"model": model}, "b": {"model": model}},
                baseline="a",
                rounds=rounds,
            )
            job_id, planned = created["id"], created["planned_trials"]
            mark(f"submitted job {job_id}: {planned} trials, {args.slots} at once")
            steps = [
                (planned // 4, "kill node-3", lambda: cluster.kill_node("node-3")),
                (planned // 2, "drain node-2", lambda: cluster.drain("node-2")),
                (3 * planned // 4, "activate node-2", lambda: cluster.activate("node-2")),
            ]
            last_print = 0.0
            while True:
                job = _job(server, job_id)
                done = job["counts"]["finished"]
                while steps and done >= steps[0][0]:
                    _, what, act = steps.pop(0)
                    act()
                    mark(f"{what} (at {done} finished)")
                if job["status"] in ("finished", "cancelled"):
                    break
                if time.monotonic() - last_print >= PROGRESS_S:
                    last_print = time.monotonic()
                    rate = 60 * done / max(time.monotonic() - started, 1e-9)
                    mark(
                        f"{done}/{planned} finished, {job['counts']['running']} running, "
                        f"{rate:.0f}/min, load {os.getloadavg()[0]:.1f}"
                    )
                if time.monotonic() - started > args.timeout_s:
                    raise SystemExit(f"the soak did not finish in {args.timeout_s} s")
                time.sleep(1.0)
            elapsed = time.monotonic() - started
            mark(f"job {job['status']}")
            trials = _trials(server, job_id)
            report = server.http.get(f"/v1/jobs/{job_id}/report").json()
        finally:
            server.stop()
        engine = make_engine(url)
        with session_factory(engine)() as session:
            kept = counts.read(session, job_id)
            afresh = counts.count_trials(session, job_id)
        engine.dispose()
    left = leftovers(backend, cluster, timeout_s=60)

    scored = [t for t in trials if t["outcome"] in ("passed", "failed")]
    per_slot = Counter((t["variant"], t["case_id"], t["round"]) for t in scored)
    others = [t for t in trials if t["outcome"] not in ("passed", "failed")]
    checks = {
        "job finished": job["status"] == "finished",
        "every (variant, case, round) scored exactly once": len(per_slot) == planned
        and set(per_slot.values()) == {1},
        "every scored trial passed": all(t["outcome"] == "passed" for t in scored),
        "every other attempt an infra error": all(t["error_kind"] == "infra_error" for t in others),
        "kept counts equal the trials counted afresh": kept is not None
        and {k: getattr(kept, k) for k in afresh} == afresh,
        "the report counts every planned trial scored": sum(
            v["scored_trials"] for v in report["variants"]
        )
        == planned,
        "nothing left on the swarm": not left,
    }
    for name, ok in checks.items():
        print(f"{'ok  ' if ok else 'FAIL'} {name}")
    return {
        "trials_planned": planned,
        "attempts": len(trials),
        "infra_errors": len(others),
        "slots": args.slots,
        "pool": args.pool,
        "store": "postgresql" if args.postgres else "sqlite",
        "seconds": round(elapsed, 1),
        "trials_per_min": round(60 * planned / elapsed, 1),
        "per_node": dict(Counter(t["node"] for t in scored)),
        "events": events,
        "checks": checks,
        "left_behind": left,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trials", type=int, default=5000)
    parser.add_argument("--slots", type=int, default=6, help="the plane's containers at once")
    parser.add_argument("--pool", type=int, default=2, help="EXAMHALL_POOL_SIZE of the plane")
    parser.add_argument("--postgres", help="an empty PostgreSQL database (default: SQLite)")
    parser.add_argument("--timeout-s", type=float, default=4 * 3600)
    parser.add_argument("--json", help="output file (default bench/results/soak.json)")
    args = parser.parse_args()
    host = docker.from_env()
    reap_orphans(host)
    cluster = Cluster.start(host, nodes=3, label=f"soak{uuid.uuid4().hex[:8]}")
    try:
        result = run(args, cluster, host)
    finally:
        cluster.teardown()
    write_json("soak", result, args.json)
    return 0 if all(result["checks"].values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
