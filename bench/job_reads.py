"""Job reads at scale: submitting and reading jobs of 1k, 10k and 100k trials, and what the
event stream's polls cost the store.

    python3 bench/job_reads.py [--repeats 20] [--rounds 1,10,100] [--stream-started 20000]

Part 1, over HTTP: `examhall serve` (EXAMHALL_MAX_CONTAINERS=1, a fresh SQLite store) gets
a suite of 1,000 cases whose agent sleeps, listed once by a one-case job. Then one job per
`--rounds` value is submitted (1k, 10k, 100k trials; the POST is timed), and these reads
take turns, size after size, `--repeats` times: `GET /v1/jobs/{id}`, `GET /v1/jobs` (the
list, every job), and the web job page `GET /ui/jobs/{id}` (signed in with a session
cookie). One trial runs (and sleeps) and the rest stay queued, so nothing changes between
reads: the report on the page is built once per job, then kept by its change marker.

Part 2, in process, on a store of its own: a job of 1,000 cases x 100 rounds is created by
`create_job`, and `--stream-started` of its trials are claimed and finished through the
real queue. Then the stream's poll (`JobWatch.poll`, as `GET /v1/jobs/{id}/stream` runs it
every 0.5 s) is timed with nothing changed, and after 10 more trials changed, beside what
each poll read before the change marker: every started trial's row and every trial's
state (to count them). Rows read are counted by the statements' results. The polls' report
event is left out (REPORT_EVERY_S set to infinity): it comes at most every 2 s, built once
per change for every stream and page, and costs what bench/report_cost.py measures.
"""

from __future__ import annotations

import argparse
import re
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from _common import ControlPlane, median, sandbox_image, table, write_json

TARGET_READ_S = 0.050
TARGET_SUBMIT_S = 2.0

HOLD_SUITE = '''"""Cases whose agent sleeps: the one container holds, the jobs stay queued."""

from sandbox import faux, judges
from sandbox.suite import Case

CASES = [
    Case(
        id=f"hold-{n:04d}",
        input="Wait, then write done.txt.",
        tools=("bash", "write"),
        judges=[judges.file_equals("done.txt", "done")],
        scripts={
            "solution": [
                faux.bash("sleep 600"),
                faux.call("write", path="done.txt", content="done\\n"),
                faux.text("Done."),
            ]
        },
    )
    for n in range(1000)
]
'''


def _body(rounds: int, cases: list[str] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "suite": {"name": "bench_hold", "source": HOLD_SUITE},
        "model": {"provider": "simulated", "id": "coin?p=1"},
        "rounds": rounds,
        "limits": {"timeout_s": 900},
    }
    if cases:
        body["cases"] = cases
    return body


def _sign_in(plane: ControlPlane) -> httpx.Client:
    from _common import ADMIN_TOKEN

    client = httpx.Client(base_url=plane.url, timeout=600, follow_redirects=False)
    response = client.post(
        "/ui/login", data={"token": ADMIN_TOKEN, "next": "/ui/jobs"}, headers={"Origin": plane.url}
    )
    if response.status_code != 303:
        raise RuntimeError(f"signing in answered {response.status_code}: {response.text[:300]}")
    return client


def http_part(args: argparse.Namespace) -> dict[str, Any]:
    sandbox_image()
    rounds = [int(r) for r in args.rounds.split(",")]
    with tempfile.TemporaryDirectory(prefix="examhall-bench-") as tmp:
        plane = ControlPlane(Path(tmp), max_containers=1)
        try:
            plane.wait_ready()
            # The listing (a container) once, by a one-case job that holds the container.
            plane.submit(_body(1, ["hold-0000"]))
            jobs: dict[int, str] = {}
            submit_s: dict[int, float] = {}
            for r in rounds:
                started = time.perf_counter()
                created = plane.submit(_body(r))
                submit_s[created["planned_trials"]] = time.perf_counter() - started
                jobs[created["planned_trials"]] = created["id"]
            api = httpx.Client(base_url=plane.url, headers=plane.headers, timeout=600)
            web = _sign_in(plane)

            def get(client: httpx.Client, path: str) -> float:
                started = time.perf_counter()
                response = client.get(path)
                elapsed = time.perf_counter() - started
                response.raise_for_status()
                return elapsed

            samples: dict[str, list[float]] = {}
            for repeat in range(args.repeats + 1):  # the first round warms up (and builds)
                for size, job_id in jobs.items():
                    for name, client, path in (
                        (f"GET /v1/jobs/{{id}} {size:,}", api, f"/v1/jobs/{job_id}"),
                        (f"GET /ui/jobs/{{id}} {size:,}", web, f"/ui/jobs/{job_id}"),
                    ):
                        elapsed = get(client, path)
                        if repeat:
                            samples.setdefault(name, []).append(elapsed)
                elapsed = get(api, "/v1/jobs?limit=100")
                if repeat:
                    samples.setdefault(f"GET /v1/jobs ({len(jobs) + 1} jobs)", []).append(elapsed)
            page = web.get(f"/ui/jobs/{jobs[max(jobs)]}").text
            cells = len(re.findall(r'class="cell ', page))
            view = plane.job(jobs[max(jobs)])
        finally:
            plane.stop()
    return {
        "submit_s": {str(k): v for k, v in submit_s.items()},
        "reads_s": {name: median(values) for name, values in samples.items()},
        "reads_max_s": {name: max(values) for name, values in samples.items()},
        "largest_page_cells": cells,
        "largest_counts": view["counts"],
    }


def stream_part(args: argparse.Namespace) -> dict[str, Any]:
    from sqlalchemy.engine import Result

    import service.api.stream as stream_module
    from sandbox.protocol import TrialResult
    from service.api.stream import JobWatch
    from service.domain.job_spec import JobRequest
    from service.domain.planner import resolve_design
    from service.store import counts
    from service.store.db import make_engine, migrate, session_factory
    from service.store.jobs import create_job
    from service.store.queue import claim
    from service.store.results import record_result
    from service.store.trials import started_trials
    from service.suites.python import load_suite

    with tempfile.TemporaryDirectory(prefix="examhall-bench-") as tmp:
        engine = make_engine(f"sqlite:///{Path(tmp) / 'stream.db'}")
        migrate(engine)
        sessions = session_factory(engine)
        cases = [f"case-{i:04d}" for i in range(1000)]
        request = JobRequest.model_validate(
            {"suite": "smoke", "model": {"provider": "simulated", "id": "coin?p=1"}, "rounds": 100}
        )
        with sessions.begin() as session:
            job = create_job(
                session,
                request,
                load_suite("smoke"),
                resolve_design(request, cases),
                image="examhall/sandbox:bench",
                image_digest=None,
            )
            job_id = job.id
        owner = "bench:1:stream"

        def run(n: int) -> None:
            done = 0
            while done < n:
                for claimed in claim(sessions, owner, min(500, n - done), []):
                    record_result(
                        sessions,
                        owner,
                        claimed.trial_id,
                        TrialResult("passed", score=1.0),
                        artifacts={},
                        sandbox_id=None,
                        wall_s=1.0,
                        cost_usd=None,
                    )
                    done += 1

        started = time.perf_counter()
        run(args.stream_started)
        print(f"ran {args.stream_started:,} trials in {time.perf_counter() - started:.1f} s")

        def fetched(poll: Any) -> tuple[float, int]:
            # The trial rows the poll read: the store's reads of many rows all go through
            # Result.all(), counted here (a row by its key, or one value, is not).
            original = Result.all
            taken = [0]

            def counting_all(self: Any) -> Any:
                result = original(self)
                taken[0] += len(result)
                return result

            Result.all = counting_all  # type: ignore[method-assign]
            try:
                started = time.perf_counter()
                poll()
                return time.perf_counter() - started, taken[0]
            finally:
                Result.all = original  # type: ignore[method-assign]

        def before() -> None:
            # What a poll read before the marker: every started trial, and every trial's
            # state to count them.
            with sessions() as session:
                started_trials(session, job_id)
                counts.count_trials(session, job_id)

        # The polls' own reads: the report event (at most every REPORT_EVERY_S, built once per
        # change marker for every stream and page) is report_cost.py's figure.
        stream_module.REPORT_EVERY_S = float("inf")
        watch = JobWatch(sessions, job_id)
        first_s, first_rows = fetched(watch.poll)
        quiet = [fetched(watch.poll) for _ in range(args.repeats)]
        changed = []
        old = []
        for _ in range(args.repeats):
            run(10)
            changed.append(fetched(watch.poll))
            old.append(fetched(before))
        engine.dispose()
    return {
        "trials": 100_000,
        "started": args.stream_started,
        "first_poll": {"s": first_s, "rows": first_rows},
        "poll_nothing_changed": {
            "s": median([s for s, _ in quiet]),
            "rows": median([n for _, n in quiet]),
        },
        "poll_10_changed": {
            "s": median([s for s, _ in changed]),
            "rows": median([n for _, n in changed]),
        },
        "poll_before_marker": {
            "s": median([s for s, _ in old]),
            "rows": median([n for _, n in old]),
        },
    }


def _load() -> str:
    """The 1, 5 and 15 minute load averages: on a shared machine, part of every figure."""
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def summary(http: dict[str, Any]) -> list[str]:
    """One line per target at the largest size: the figure, the target, met or not."""
    largest = max(int(k) for k in http["submit_s"])
    figures = [
        (f"POST /v1/jobs {largest:,} trials", http["submit_s"][str(largest)], TARGET_SUBMIT_S),
        *(
            (f"{name} (median)", value, TARGET_READ_S)
            for name, value in http["reads_s"].items()
            if name.endswith(f" {largest:,}") or name.startswith("GET /v1/jobs (")
        ),
    ]
    load = _load()
    return [
        f"SUMMARY {name}: {value:.3f} s, target < {target:g} s: "
        f"{'met' if value < target else 'MISSED'} (load {load})"
        for name, value, target in figures
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--rounds", default="1,10,100", help="rounds of the 1,000-case jobs")
    parser.add_argument("--stream-started", type=int, default=20_000)
    parser.add_argument("--skip-http", action="store_true", help="only the stream's part")
    parser.add_argument("--json", help="output file (default bench/results/job_reads.json)")
    args = parser.parse_args()

    results: dict[str, Any] = {"loadavg_start": _load()}
    if not args.skip_http:
        results["http"] = http_part(args)
        http = results["http"]
        print(table(["trials", "POST /v1/jobs s"], [[k, v] for k, v in http["submit_s"].items()]))
        print()
        print(
            table(
                ["read", "median s", "max s"],
                [[k, v, http["reads_max_s"][k]] for k, v in http["reads_s"].items()],
            )
        )
        print(f"the largest job's page: {http['largest_page_cells']:,} grid cells")
        for line in summary(http):
            print(line)
    results["stream"] = stream_part(args)
    stream = results["stream"]
    print()
    print(
        table(
            ["poll of a 100k-trial job", "median s", "rows read"],
            [
                [name, stream[name]["s"], stream[name]["rows"]]
                for name in (
                    "first_poll",
                    "poll_nothing_changed",
                    "poll_10_changed",
                    "poll_before_marker",
                )
            ],
        )
    )
    results["targets"] = {"read_s": TARGET_READ_S, "submit_s": TARGET_SUBMIT_S}
    results["loadavg_end"] = _load()
    write_json("job_reads", results, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
