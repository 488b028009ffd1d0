"""Load and crash: one big job, many stream followers, and the control plane SIGKILLed
mid-job, again and again. Nothing may be lost, counted twice, or left running.

    python3 bench/load_crash.py [--rounds 200] [--followers 10] [--kills 3] [--containers 2]

`examhall serve` runs in a subprocess on a fresh SQLite store. The smoke suite (4 cases)
is submitted with `simulated/coin?p=0.7` for `--rounds` rounds (800 trials by default).
`--followers` threads follow `GET /v1/jobs/{id}/stream`, reconnecting whenever the control
plane is gone, and one thread reads `/healthz` every half second. Each time another quarter
of the trials has finished, the control plane is SIGKILLed and started again on the same
store and port. At the end every (case, round) must have exactly one finished trial, no
trial may be an `infra_error` or `sandbox_error`, the report must count each trial once,
and no container of the job may remain. This is a check as much as a measurement: it exits 1
when any of that fails.
"""

from __future__ import annotations

import argparse
import json
import signal
import socket
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import docker
import httpx
from _common import ControlPlane, sandbox_image, table, write_json

from service.backends.docker import LABEL_JOB


class Follower(threading.Thread):
    """Follows a job's event stream to its `end`, reconnecting across restarts."""

    def __init__(self, plane: ControlPlane, job_id: str, done: threading.Event) -> None:
        super().__init__(daemon=True)
        self.url = f"{plane.url}/v1/jobs/{job_id}/stream"
        self.headers = plane.headers
        self.done = done
        self.events: Counter[str] = Counter()
        self.connections = 0
        self.ended = False

    def run(self) -> None:
        while not self.done.is_set() and not self.ended:
            try:
                with httpx.stream("GET", self.url, headers=self.headers, timeout=30) as response:
                    self.connections += 1
                    for line in response.iter_lines():
                        if line.startswith("event: "):
                            kind = line.removeprefix("event: ")
                            self.events[kind] += 1
                            if kind == "end":
                                self.ended = True
                                return
            except httpx.HTTPError:
                pass
            time.sleep(0.5)


class Health(threading.Thread):
    def __init__(self, plane: ControlPlane, done: threading.Event) -> None:
        super().__init__(daemon=True)
        self.url = f"{plane.url}/healthz"
        self.done = done
        self.slowest_s = 0.0
        self.answered = 0

    def run(self) -> None:
        while not self.done.wait(0.5):
            started = time.monotonic()
            try:
                if httpx.get(self.url, timeout=30).status_code == 200:
                    self.answered += 1
                    self.slowest_s = max(self.slowest_s, time.monotonic() - started)
            except httpx.HTTPError:
                pass  # down between a kill and the restart


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def finished(plane: ControlPlane, job_id: str) -> int:
    try:
        view = plane.job(job_id)
    except httpx.HTTPError:
        return 0
    return int(view["counts"]["finished"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--followers", type=int, default=10)
    parser.add_argument("--kills", type=int, default=3)
    parser.add_argument("--containers", type=int, default=2)
    parser.add_argument("--json", help="write the results here instead of bench/results/")
    args = parser.parse_args()

    print(f"sandbox image {sandbox_image()}")
    client = docker.from_env()
    workdir = Path(tempfile.mkdtemp(prefix="examhall-load-"))
    port = free_port()
    plane = ControlPlane(workdir, max_containers=args.containers, port=port)
    plane.wait_ready()
    started = time.monotonic()
    created = plane.submit(
        {"suite": "smoke", "model": {"provider": "simulated", "id": "coin?p=0.7"},
         "rounds": args.rounds, "seed": 11}
    )  # fmt: skip
    job_id, planned = created["id"], created["planned_trials"]
    done = threading.Event()
    followers = [Follower(plane, job_id, done) for _ in range(args.followers)]
    health = Health(plane, done)
    for thread in (*followers, health):
        thread.start()

    kills: list[dict[str, Any]] = []
    for n in range(1, args.kills + 1):
        mark = planned * n // (args.kills + 1)
        while finished(plane, job_id) < mark:
            time.sleep(0.2)
        at = finished(plane, job_id)
        plane.process.send_signal(signal.SIGKILL)
        plane.process.wait()
        killed = time.monotonic()
        orphans = len(client.containers.list(all=True, filters={"label": f"{LABEL_JOB}={job_id}"}))
        plane = ControlPlane(workdir, max_containers=args.containers, port=port)
        plane.wait_ready()
        kills.append(
            {"at_finished": at, "orphans": orphans, "back_in_s": time.monotonic() - killed}
        )
        print(f"kill {n}: at {at}/{planned} finished, {orphans} orphaned containers")

    view = plane.wait_finished(job_id, timeout_s=3600)
    wall_s = time.monotonic() - started
    for follower in followers:
        follower.join(timeout=60)
    done.set()
    trials = httpx.get(
        f"{plane.url}/v1/jobs/{job_id}/trials", headers=plane.headers, timeout=120
    ).json()
    report = httpx.get(
        f"{plane.url}/v1/jobs/{job_id}/report", headers=plane.headers, timeout=120
    ).json()
    left = client.containers.list(all=True, filters={"label": f"{LABEL_JOB}={job_id}"})
    plane.stop()

    # Every attempt is listed; an earlier one is kept only when it was an infra_error.
    problems = []
    latest: dict[tuple[str, int, str], dict[str, Any]] = {}
    for t in sorted(trials, key=lambda t: t["attempt"]):
        slot = (t["case_id"], t["round"], t["variant"])
        if slot in latest and latest[slot]["error_kind"] != "infra_error":
            problems.append(f"{slot} ran again after a scored attempt")
        latest[slot] = t
    outcomes = Counter(t["error_kind"] or t["outcome"] for t in latest.values())
    scored = sum(v["scored_trials"] for v in report["variants"])
    if len(latest) != planned:
        problems.append(f"{len(latest)} of {planned} (case, round) slots have a trial")
    if any(t["status"] != "finished" for t in latest.values()):
        problems.append("a trial did not finish")
    if outcomes["infra_error"] or outcomes["sandbox_error"]:
        problems.append(f"unscored outcomes: {dict(outcomes)}")
    if scored != planned:
        problems.append(f"the report scored {scored} of {planned} trials")
    if left:
        problems.append(f"{len(left)} containers of the job remain")
    if not all(f.ended for f in followers):
        problems.append("a follower never saw the stream's end")

    results = {
        "planned": planned,
        "status": view["status"],
        "wall_s": wall_s,
        "trials_per_s": planned / wall_s,
        "outcomes": dict(outcomes),
        "attempts": len(trials),
        "report_scored": scored,
        "kills": kills,
        "containers_left": len(left),
        "followers": [
            {"connections": f.connections, "events": dict(f.events), "ended": f.ended}
            for f in followers
        ],
        "healthz_answered": health.answered,
        "healthz_slowest_s": health.slowest_s,
        "problems": problems,
    }
    print(
        table(
            ["trials", "wall s", "trials/s", "kills", "orphans at kills", "left", "healthz max s"],
            [[planned, wall_s, planned / wall_s, len(kills), sum(k["orphans"] for k in kills),
              len(left), health.slowest_s]],
        )
    )  # fmt: skip
    print(json.dumps({"outcomes": dict(outcomes), "follower_connections":
                      [f.connections for f in followers]}))  # fmt: skip
    print("problems: " + ("; ".join(problems) or "none"))
    write_json("load_crash", results, args.json)
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
