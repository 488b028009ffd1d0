"""Report: time to compute a job report from 1k, 10k and 100k stored trials.

    python3 bench/report_cost.py [--sizes 1000,10000,100000] [--repeats 5] [--rounds 10]
    python3 bench/report_cost.py --cases 500

Each size is one finished job in a fresh SQLite store, written as rows: `--rounds` rounds
of trials/rounds cases (so cases grow with the job, and so does the work of the bootstrap's
2000 resamples of cases), or with `--cases`, that many cases and trials/cases rounds.
Outcomes are drawn per case from a spread of difficulties, with a few errors and retries,
and usage, timings and judges like a real trial's; the jobs record `--bootstrap` as their
bootstrap version (2, numpy's, by default). With `--paired`, each job is a docs-lift design
(two arms, so the paired comparison runs too). The timed call is the
API's `job_report(session, job)`: loading the rows and `build_report`. Each timed report is
cold (the cache of finished jobs' reports emptied first), then timed again warm, from that
cache. Sizes take turns (1k 10k 100k 1k 10k 100k ...); the table gives medians, the time per
trial and the growth from one size to the next.
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from _common import median, table, write_json
from sqlalchemy import insert
from sqlalchemy.orm import Session, sessionmaker

from service.report.from_store import clear_report_cache, job_report
from service.store.db import make_engine, migrate, session_factory
from service.store.models import Job, Suite, Trial

TARGET_S = 0.5
TARGET_SIZE = 100_000


def populate(
    sessions: sessionmaker[Session],
    trials: int,
    rounds: int,
    paired: bool,
    cases_count: int | None = None,
    bootstrap: int = 2,
) -> str:
    arms = ["without_docs", "with_docs"] if paired else ["default"]
    if cases_count:
        rounds = max(1, trials // (cases_count * len(arms)))
    else:
        cases_count = max(2, trials // (rounds * len(arms)))
    cases = [f"case-{i:06d}" for i in range(cases_count)]
    rng = random.Random(trials)
    difficulty = {case: rng.random() for case in cases}
    now = datetime.now(UTC).replace(tzinfo=None)
    job_id = f"job-{uuid.uuid4().hex[:16]}"
    variant = {"model": {"provider": "simulated", "id": "coin?p=0.7"}, "limits": {}}
    spec: dict[str, Any] = {
        "cases": cases,
        "variants": {arm: variant for arm in arms},
        "baseline": "without_docs" if paired else None,
        "arms": arms if paired else [],
        "bootstrap": bootstrap,
    }
    rows: list[dict[str, Any]] = []
    order = 0
    for round_ in range(1, rounds + 1):
        for case in cases:
            for arm in arms if round_ % 2 else list(reversed(arms)):
                lift = 0.1 if arm == "with_docs" else 0.0
                attempts = 2 if rng.random() < 0.01 else 1  # an infra error, then a retry
                for attempt in range(1, attempts + 1):
                    rows.append(
                        _trial(
                            rng,
                            job_id,
                            case,
                            arm,
                            round_,
                            order,
                            attempt,
                            last=attempt == attempts,
                            p=min(1.0, difficulty[case] + lift),
                        )
                    )
                order += 1
    with sessions.begin() as session:
        sha = uuid.uuid4().hex * 2
        session.add(Suite(sha256=sha, name="bench", source="", created_at=now))
        session.flush()
        session.add(
            Job(
                id=job_id,
                status="finished",
                suite_sha256=sha,
                suite_name="bench",
                spec=spec,
                rounds=rounds,
                seed=7,
                max_infra_retries=1,
                planned=order,
                image="examhall/sandbox:bench",
                image_digest="sha256:bench",
                service_version="bench",
                created_at=now,
                finished_at=now,
            )
        )
        session.flush()
        for start in range(0, len(rows), 5000):
            session.execute(insert(Trial), rows[start : start + 5000])
    return job_id


def _trial(
    rng: random.Random,
    job_id: str,
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
    return {
        "id": f"trial-{uuid.uuid4().hex[:16]}",
        "job_id": job_id,
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
        "system_prompt_sha256": f"{hash(arm) & 0xFFFFFFFF:064x}",
        "limits_hit": ["pids"] if rng.random() < 0.001 else [],
        "container_id": uuid.uuid4().hex * 2,
        "owner": "bench",
        "wall_s": rng.uniform(1, 300),
    }


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
        default=2,
        help="the jobs' bootstrap version (service/report/resampling.py; 1 = before numpy)",
    )
    parser.add_argument("--json", help="output file (default bench/results/report.json)")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]

    with tempfile.TemporaryDirectory(prefix="examhall-bench-") as tmp:
        engine = make_engine(f"sqlite:///{Path(tmp) / 'report.db'}")
        migrate(engine)
        sessions = session_factory(engine)
        jobs = {}
        for size in sizes:
            started = time.perf_counter()
            jobs[size] = populate(
                sessions, size, args.rounds, args.paired, args.cases, args.bootstrap
            )
            print(f"stored a job of {size:,} trials in {time.perf_counter() - started:.1f} s")

        def report(size: int, *, cold: bool = True) -> float:
            if cold:
                clear_report_cache()
            with sessions() as session:
                started = time.perf_counter()
                job = session.get(Job, jobs[size])
                assert job is not None
                data = job_report(session, job)
                elapsed = time.perf_counter() - started
            assert data.variants, "the report has no variants"
            return elapsed

        for size in sizes:  # warm-up: caches, first-use imports
            report(size)
        times: dict[int, list[float]] = {size: [] for size in sizes}
        warm: dict[int, list[float]] = {size: [] for size in sizes}
        for i in range(args.repeats):
            for size in sizes:
                times[size].append(report(size))
                warm[size].append(report(size, cold=False))
            print(f"  {i + 1}/{args.repeats}", end="\r", flush=True)
        print()
        engine.dispose()

    medians = {size: median(values) or 0.0 for size, values in times.items()}
    warm_medians = {size: median(values) or 0.0 for size, values in warm.items()}
    rows = []
    previous: int | None = None
    for size in sizes:
        growth = medians[size] / medians[previous] if previous else None
        rows.append(
            [
                f"{size:,}",
                medians[size],
                1e6 * medians[size] / size,
                warm_medians[size],
                None
                if growth is None
                else f"{growth:.1f}x for {size // previous}x trials"
                if previous
                else None,
            ]
        )
        previous = size
    print()
    print(table(["trials", "median s", "us per trial", "warm s", "growth"], rows))
    met = TARGET_SIZE not in medians or medians[TARGET_SIZE] < TARGET_S
    print(f"target: a {TARGET_SIZE:,}-trial report in under {TARGET_S} s, growing linearly")
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
            "median_s": {str(k): v for k, v in medians.items()},
            "samples_s": {str(k): v for k, v in times.items()},
            "warm_median_s": {str(k): v for k, v in warm_medians.items()},
            "warm_samples_s": {str(k): v for k, v in warm.items()},
            "target_s": TARGET_S,
            "met": met,
        },
        args.json,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
