"""Report: time to compute a job report from 1k, 10k and 100k stored trials (or 1M).

    python3 bench/report_cost.py [--sizes 1000,10000,100000] [--repeats 5] [--rounds 10]
    python3 bench/report_cost.py --cases 500
    python3 bench/report_cost.py --paired --db /tmp/report.db --baseline /path/to/checkout
    python3 bench/report_cost.py --sizes 100000 --profile 30

Each size is one finished job in a SQLite store, written as rows: `--rounds` rounds of
trials/rounds cases (so cases grow with the job, and so does the work of the bootstrap's
2000 resamples of cases), or with `--cases`, that many cases and trials/cases rounds.
Outcomes are drawn per case from a spread of difficulties, with a few errors and retries,
and usage, timings and judges like a real trial's; the jobs record `--bootstrap` as their
bootstrap version (3 by default; 2 to time a checkout from before version 3 beside this
one). With `--paired`, each job is a docs-lift design (two arms, so the paired comparison
runs too). The jobs are the same in every run (fixed
seeds and ids). `--db PATH` keeps the store: a job already in it is not written again, so
a 1M-trial job is stored once (the load drops the trials' indexes and builds them after).

The timed call is the API's `job_report(session, job)`: loading the rows and
`build_report`. Each side runs in a process of its own (this checkout's service, and with
`--baseline TREE` that tree's service on the same store), and the sides and sizes take
turns (A B A B ...). Each timed report is cold (the cache of reports emptied first), then
timed again warm, from that cache. The table gives medians, the time per trial and the
growth from one size to the next; the last line is the summary against the target.
`--dump DIR` writes each side's reports (JSON and text, `generated_at` masked) to diff;
`--profile N` profiles one cold report of the largest size and prints the top N functions.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import os
import random
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from _common import REPO, median, table, write_json

TARGET_S = 0.5
TARGET_SIZE = 100_000
_CHUNK = 5000
_GENERATED = re.compile(r'("generated_at":")[^"]*(")|(generated )\S+Z')


def job_id(size: int, rounds: int, paired: bool, cases: int | None, bootstrap: int) -> str:
    design = f"c{cases}" if cases else f"r{rounds}"
    return f"bench-{'paired-' if paired else ''}{design}-b{bootstrap}-{size}"


def populate(
    url: str,
    job: str,
    trials: int,
    rounds: int,
    paired: bool,
    cases_count: int | None = None,
    bootstrap: int = 3,
) -> bool:
    """Store the job unless the store holds it; whether it was written."""
    from sqlalchemy import insert, text

    from service.store import counts, tallies
    from service.store.db import make_engine, migrate, session_factory
    from service.store.models import Job, Suite, Trial

    engine = make_engine(url)
    migrate(engine)
    sessions = session_factory(engine)
    with sessions.begin() as session:
        stored = session.get(Job, job) is not None
        if stored and tallies.read(session, job) is None:  # kept by a version before them
            counts.recount(session, job)
    if stored:
        engine.dispose()
        return False
    arms = ["without_docs", "with_docs"] if paired else ["default"]
    if cases_count:
        rounds = max(1, trials // (cases_count * len(arms)))
    else:
        cases_count = max(2, trials // (rounds * len(arms)))
    cases = [f"case-{i:06d}" for i in range(cases_count)]
    rng = random.Random(job)  # each job its own draws (and trial ids)
    difficulty = {case: rng.random() for case in cases}
    now = datetime.now(UTC).replace(tzinfo=None)
    variant = {"model": {"provider": "simulated", "id": "coin?p=0.7"}, "limits": {}}
    spec: dict[str, Any] = {
        "cases": cases,
        "variants": {arm: variant for arm in arms},
        "baseline": "without_docs" if paired else None,
        "arms": arms if paired else [],
        "bootstrap": bootstrap,
    }
    planned = rounds * len(cases) * len(arms)

    def rows() -> Iterator[dict[str, Any]]:
        order = 0
        for round_ in range(1, rounds + 1):
            for case in cases:
                for arm in arms if round_ % 2 else list(reversed(arms)):
                    lift = 0.1 if arm == "with_docs" else 0.0
                    attempts = 2 if rng.random() < 0.01 else 1  # an infra error, then a retry
                    for attempt in range(1, attempts + 1):
                        yield _trial(
                            rng,
                            job,
                            case,
                            arm,
                            round_,
                            order,
                            attempt,
                            last=attempt == attempts,
                            p=min(1.0, difficulty[case] + lift),
                        )
                    order += 1

    indexes = list(Trial.__table__.indexes)
    with sessions.begin() as session:
        sha = hashlib.sha256(job.encode()).hexdigest()
        session.add(Suite(sha256=sha, name="bench", source="", created_at=now))
        session.flush()
        session.add(
            Job(
                id=job,
                status="finished",
                suite_sha256=sha,
                suite_name="bench",
                spec=spec,
                rounds=rounds,
                seed=7,
                max_infra_retries=1,
                planned=planned,
                image="examhall/sandbox:bench",
                image_digest="sha256:bench",
                service_version="bench",
                created_at=now,
                finished_at=now,
            )
        )
        session.flush()
        # A bulk load: the indexes are built once at the end, not row by row (several
        # times faster for a 1M-trial job).
        for index in indexes:
            session.execute(text(f"DROP INDEX IF EXISTS {index.name}"))
        chunk: list[dict[str, Any]] = []
        for row in rows():
            chunk.append(row)
            if len(chunk) == _CHUNK:
                session.execute(insert(Trial), chunk)
                chunk = []
        if chunk:
            session.execute(insert(Trial), chunk)
        for index in indexes:
            index.create(session.connection())
        # What the store keeps of a job as its trials end (its counts and tallies), worked
        # out once: a report reads them as it would for a job that ran here. (A checkout
        # from before them, timed beside this one with --baseline, ignores them.)
        counts.recount(session, job)
    with engine.connect() as connection:
        connection.exec_driver_sql("ANALYZE")
    engine.dispose()
    return True


def _trial(
    rng: random.Random,
    job: str,
    case: str,
    arm: str,
    round_: int,
    order: int,
    attempt: int,
    *,
    last: bool,
    p: float,
) -> dict[str, Any]:
    error_kind = None
    if not last:
        error_kind = "infra_error"
    elif rng.random() < 0.02:
        error_kind = rng.choice(["timeout", "agent_error", "provider_error", "limit_exceeded"])
    outcome = "error" if error_kind else ("passed" if rng.random() < p else "failed")
    row = {
        "id": f"trial-{rng.getrandbits(64):016x}",
        "job_id": job,
        "case_id": case,
        "variant": arm,
        "round": round_,
        "order": order,
        "attempt": attempt,
        "status": "finished",
        "outcome": outcome,
        "score": {"passed": 1.0, "failed": 0.0}.get(outcome),
        "error_kind": error_kind,
        "error_message": f"the trial ended {error_kind}" if error_kind else None,
        "model_requested": "simulated/coin?p=0.7",
        "model_returned": "simulated/coin?p=0.7",
        "tool_calls": rng.randint(1, 30),
        "usage": {
            "input_tokens": rng.randint(1000, 90000),
            "output_tokens": rng.randint(100, 4000),
            "requests": rng.randint(1, 30),
            "cache_read_tokens": 0,
            "cache_write_tokens": 0,
            "cost_usd": None,
        },
        "judges": [
            {
                "name": "file_equals",
                "score": 1.0 if outcome == "passed" else 0.0,
                "detail": "hello.txt",
            }
        ],
        "timings": {
            "start_as_root": 0.0001,
            "read_spec": 0.0003,
            "load_bundle": 0.003,
            "scrub_env": 0.0002,
            "seed_workspace": 0.0004,
            "drop_privileges": 0.0007,
            "self_check": 0.023,
            "run_agent": rng.uniform(1, 300),
            "judge": 0.0003,
            "container_create": 0.02,
            "container_start": 0.19,
            "container_teardown": 0.007,
        },
        "final_text": "Done: the file is written.",
        "system_prompt_sha256": hashlib.sha256(arm.encode()).hexdigest(),
        "limits_hit": ["pids"] if rng.random() < 0.001 else [],
        "container_id": f"{rng.getrandbits(256):064x}",
        "owner": "bench",
        "wall_s": rng.uniform(1, 300),
    }
    # The columns the store keeps of usage and timings as it records a result.
    row["input_tokens"] = row["usage"]["input_tokens"]
    row["output_tokens"] = row["usage"]["output_tokens"]
    row["latency_s"] = row["timings"]["run_agent"]
    row["cost_usd"] = row["usage"]["cost_usd"]
    return row


# --- a side: one process, its tree's service, answering requests on stdin ----------------


def serve(url: str) -> int:
    """Answer `cold JOB`, `warm JOB`, `dump JOB PATH` and `profile JOB N`, one a line."""
    from service.report.from_store import clear_report_cache, job_report
    from service.report.render_text import render_text
    from service.store.db import make_engine, session_factory
    from service.store.models import Job

    engine = make_engine(url)
    sessions = session_factory(engine)

    def report(job_id: str, *, cold: bool) -> tuple[float, Any]:
        if cold:
            clear_report_cache()
        with sessions() as session:
            started = time.perf_counter()
            job = session.get(Job, job_id)
            assert job is not None, f"the store holds no job {job_id}"
            data = job_report(session, job)
            elapsed = time.perf_counter() - started
        assert data.variants, "the report has no variants"
        return elapsed, data

    print(f"ready {Path(sys.modules['service'].__file__ or '').parent.parent}", flush=True)
    for line in sys.stdin:
        verb, job_id, *rest = line.split()
        if verb in ("cold", "warm"):
            elapsed, _ = report(job_id, cold=verb == "cold")
            print(f"{elapsed:.6f}", flush=True)
        elif verb == "dump":
            _, data = report(job_id, cold=True)
            target = Path(rest[0])
            masked = _GENERATED.sub(r"\1\2\3", data.model_dump_json())
            target.with_suffix(".json").write_text(masked + "\n")
            target.with_suffix(".txt").write_text(_GENERATED.sub(r"\1\2\3", render_text(data)))
            print("done", flush=True)
        elif verb == "profile":
            import cProfile
            import pstats

            report(job_id, cold=True)  # first-use imports out of the profile
            profiler = cProfile.Profile()
            profiler.enable()
            elapsed, _ = report(job_id, cold=True)
            profiler.disable()
            print(f"one cold report, profiled: {elapsed:.3f} s", file=sys.stderr)
            stats = pstats.Stats(profiler, stream=sys.stderr).sort_stats("tottime")
            stats.print_stats(int(rest[0]))
            stats.sort_stats("cumulative").print_stats(int(rest[0]))
            print("done", flush=True)
    engine.dispose()
    return 0


class Side:
    """A `serve` process running `tree`'s service."""

    def __init__(self, name: str, tree: Path, url: str) -> None:
        self.name = name
        env = dict(os.environ, PYTHONPATH=str(tree))
        self._process = subprocess.Popen(
            [sys.executable, __file__, "--serve", url],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        self.tree = self._answer().removeprefix("ready ")

    def ask(self, request: str) -> str:
        stdin: IO[str] | None = self._process.stdin
        assert stdin is not None
        stdin.write(request + "\n")
        stdin.flush()
        return self._answer()

    def _answer(self) -> str:
        assert self._process.stdout is not None
        line = self._process.stdout.readline()
        if not line:
            raise RuntimeError(
                f"side {self.name} ({self.tree if hasattr(self, 'tree') else ''}) exited"
            )
        return line.strip()

    def close(self) -> None:
        if self._process.stdin is not None:
            self._process.stdin.close()
        self._process.wait(timeout=60)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="1000,10000,100000", help="trials per job")
    parser.add_argument("--repeats", type=int, default=5, help="timed reports per size")
    parser.add_argument("--rounds", type=int, default=10, help="rounds (k) of each job")
    parser.add_argument("--cases", type=int, help="cases of each job instead (rounds vary)")
    parser.add_argument("--paired", action="store_true", help="docs-lift jobs (two arms)")
    parser.add_argument(
        "--bootstrap",
        type=int,
        default=3,
        help="the jobs' bootstrap version (service/report/resampling.py; 1 = before numpy; "
        "2 beside a checkout from before version 3)",
    )
    parser.add_argument("--db", help="a SQLite file to keep the jobs in (default: a temporary one)")
    parser.add_argument("--baseline", help="a checkout whose service is timed beside this one")
    parser.add_argument("--dump", help="a folder to write each side's reports to")
    parser.add_argument("--profile", type=int, help="profile one cold report, top N functions")
    parser.add_argument("--json", help="output file (default bench/results/report.json)")
    parser.add_argument("--serve", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        return serve(args.serve)
    sizes = [int(s) for s in args.sizes.split(",")]

    with tempfile.TemporaryDirectory(prefix="examhall-bench-") as tmp:
        url = f"sqlite:///{Path(args.db).resolve() if args.db else Path(tmp) / 'report.db'}"
        jobs = {}
        for size in sizes:
            jobs[size] = job_id(size, args.rounds, args.paired, args.cases, args.bootstrap)
            started = time.perf_counter()
            if populate(
                url, jobs[size], size, args.rounds, args.paired, args.cases, args.bootstrap
            ):
                print(f"stored a job of {size:,} trials in {time.perf_counter() - started:.1f} s")
        trees = {"this": REPO}
        if args.baseline:
            trees["baseline"] = Path(args.baseline).resolve()
        sides = [Side(name, tree, url) for name, tree in trees.items()]
        try:
            for side in sides:
                print(f"side {side.name}: {side.tree}")
            if args.dump:
                folder = Path(args.dump)
                folder.mkdir(parents=True, exist_ok=True)
                for side in sides:
                    for size in sizes:
                        side.ask(f"dump {jobs[size]} {folder / f'{side.name}-{jobs[size]}'}")
                print(f"wrote the reports to {folder}")
            if args.profile:
                for side in sides:
                    print(f"profile of side {side.name}:", file=sys.stderr)
                    side.ask(f"profile {jobs[max(sizes)]} {args.profile}")
                return 0
            times, warm = measure(sides, jobs, args.repeats)
        finally:
            for side in sides:
                side.close()

    load = Path("/proc/loadavg").read_text().split()[:3]
    summary: dict[str, Any] = {}
    for side in sides:
        medians = {size: median(times[side.name][size]) or 0.0 for size in sizes}
        warm_medians = {size: median(warm[side.name][size]) or 0.0 for size in sizes}
        print(f"\nside {side.name} ({side.tree}):")
        print(
            table(
                ["trials", "median s", "us per trial", "warm s", "growth"],
                _rows(medians, warm_medians),
            )
        )
        summary[side.name] = {
            "tree": side.tree,
            "median_s": {str(k): v for k, v in medians.items()},
            "samples_s": {str(k): v for k, v in times[side.name].items()},
            "warm_median_s": {str(k): v for k, v in warm_medians.items()},
            "warm_samples_s": {str(k): v for k, v in warm[side.name].items()},
        }
    this = {int(k): v for k, v in summary["this"]["median_s"].items()}
    met = TARGET_SIZE not in this or this[TARGET_SIZE] < TARGET_S
    growth = ", ".join(
        f"{this[b] / this[a]:.1f}x per {b // a}x" for a, b in itertools.pairwise(sizes) if this[a]
    )
    design = (
        "docs-lift"
        if args.paired
        else (f"{args.cases} cases" if args.cases else f"{args.rounds} rounds")
    )
    figure = ", ".join(f"{size:,}: {this[size]:.3f} s" for size in sizes)
    versus = ""
    if "baseline" in summary:
        base = {int(k): v for k, v in summary["baseline"]["median_s"].items()}
        versus = "; baseline " + ", ".join(
            f"{size:,}: {base[size]:.3f} s ({base[size] / this[size]:.1f}x)" for size in sizes
        )
    print(
        f"\nsummary: cold report, {design}, {figure} (growth {growth}){versus}; "
        f"target < {TARGET_S} s at {TARGET_SIZE:,} trials, linear: {'met' if met else 'MISSED'}"
        + ("" if TARGET_SIZE in this else " (not measured)")
        + f"; load {' '.join(load)}"
    )
    write_json(
        "report"
        + ("_paired" if args.paired else "")
        + (f"_{args.cases}_cases" if args.cases else ""),
        {
            "rounds": None if args.cases else args.rounds,
            "cases": args.cases,
            "paired": args.paired,
            "bootstrap": args.bootstrap,
            "repeats": args.repeats,
            "loadavg_end": load,
            "sides": summary,
            "target_s": TARGET_S,
            "met": met,
        },
        args.json,
    )
    return 0


def measure(
    sides: list[Side], jobs: dict[int, str], repeats: int
) -> tuple[dict[str, dict[int, list[float]]], dict[str, dict[int, list[float]]]]:
    for job in jobs.values():  # warm-up: caches, first-use imports
        for side in sides:
            side.ask(f"cold {job}")
    times = {side.name: {size: [] for size in jobs} for side in sides}
    warm = {side.name: {size: [] for size in jobs} for side in sides}
    for i in range(repeats):
        for size, job in jobs.items():
            for side in sides:
                times[side.name][size].append(float(side.ask(f"cold {job}")))
                warm[side.name][size].append(float(side.ask(f"warm {job}")))
        print(
            f"  {i + 1}/{repeats} (load {Path('/proc/loadavg').read_text().split()[0]})",
            end="\r",
            flush=True,
        )
    print()
    return times, warm


def _rows(medians: dict[int, float], warm: dict[int, float]) -> list[list[Any]]:
    rows: list[list[Any]] = []
    previous: int | None = None
    for size, value in medians.items():
        growth = None
        if previous is not None and medians[previous]:
            growth = f"{value / medians[previous]:.1f}x for {size // previous}x trials"
        rows.append([f"{size:,}", value, 1e6 * value / size, warm[size], growth])
        previous = size
    return rows


if __name__ == "__main__":
    raise SystemExit(main())
