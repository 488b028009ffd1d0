"""Ingestion: events per second into the store through the scheduler's EventSink.

    python3 bench/ingestion.py [--events 1000000] [--database-url postgresql+psycopg://...]
        [--before DIR]

Each trial gets its own `service.scheduler.EventSink`, fed a transcript of synthetic
`sandbox.protocol` events (assistant messages with tool calls and usage, tool calls, tool
results of a few hundred bytes to a few kilobytes, lifecycle events) and flushed at its end,
as the scheduler does. SQLite is a fresh WAL database under a temporary directory. With
`--database-url` (a PostgreSQL server and a role that may create databases), each side gets
a fresh database named after the URL's, dropped at the end. With `--before DIR` (a checkout
of the code to compare with: `git archive REV | tar -x -C DIR`), every store is measured
twice, through that code's EventSink and through this one's.

On SQLite a chunk's time runs until the write-ahead log's pages are in the database file (a
checkpoint by the benchmark at its end): work a store defers to another thread is counted.

Each side (code x store) is a process of its own (this script, `--side`, importing `service`
from its checkout); the events are split into chunks that the sides take in turns (A B C D
A B ...), and the table gives each side's median chunk rate.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from _common import REPO, median, table, write_json
from sqlalchemy import create_engine, func, make_url, select, text
from sqlalchemy.exc import ProgrammingError
from sqlalchemy.orm import Session, sessionmaker

from sandbox.protocol import (
    Event,
    LifecycleEvent,
    MessageEvent,
    ToolCall,
    ToolCallEvent,
    ToolResultEvent,
    Usage,
)
from service.scheduler import EventSink
from service.store.db import make_engine, migrate, session_factory
from service.store.models import Event as EventRow
from service.store.models import Job, Suite, Trial

# Issue 15's targets, events per second through one sink per trial.
TARGETS = {"sqlite": 100_000, "postgresql": 50_000}
EVENTS_PER_TRIAL = 500


def transcript(n: int, salt: int) -> list[Event]:
    """A plausible agent transcript: turns of message, tool call, tool result."""
    events: list[Event] = [LifecycleEvent(step="model", detail="simulated/coin?p=1: replay")]
    turn = 0
    while len(events) < n:
        turn += 1
        call = ToolCall(f"call-{turn}", "write", {"path": f"src/f{turn}.py", "content": "x" * 200})
        events.append(
            MessageEvent(
                role="assistant",
                content=f"Step {turn} of trial {salt}: writing the next file.",
                tool_calls=[call],
                stop_reason="tool_use",
                model="bench-model",
                usage=Usage(1200 + turn, 80, 1),
            )
        )
        events.append(ToolCallEvent(id=call.id, name=call.name, arguments=call.arguments))
        events.append(
            ToolResultEvent(
                tool_call_id=call.id, name=call.name, content="line\n" * (50 + turn % 400)
            )
        )
    return events[:n]


class Store:
    def __init__(self, label: str, url: str) -> None:
        self.label = label
        self.url = url
        self.engine = make_engine(url)
        migrate(self.engine)
        self.sessions: sessionmaker[Session] = session_factory(self.engine)
        self.job_id = f"bench-{uuid.uuid4().hex[:12]}"
        now = datetime.now(UTC).replace(tzinfo=None)
        with self.sessions.begin() as session:
            sha = uuid.uuid4().hex * 2
            session.add(Suite(sha256=sha, name="bench", source="", created_at=now))
            session.flush()
            session.add(
                Job(
                    id=self.job_id,
                    status="running",
                    suite_sha256=sha,
                    suite_name="bench",
                    spec={},
                    rounds=1,
                    seed=0,
                    max_infra_retries=0,
                    planned=0,
                    image="bench",
                    service_version="bench",
                    created_at=now,
                )
            )
        self.trials = 0

    def new_trial(self) -> str:
        trial_id = f"trial-{uuid.uuid4().hex[:16]}"
        with self.sessions.begin() as session:
            session.add(
                Trial(
                    id=trial_id,
                    job_id=self.job_id,
                    case_id="c",
                    variant="default",
                    round=1,
                    order=self.trials,
                    attempt=1,
                    status="running",
                )
            )
        self.trials += 1
        return trial_id

    def ingest(self, events_per_trial: list[Event], trials: int) -> float:
        """Events per second for `trials` trials; only the sink's work is timed."""
        ids = [self.new_trial() for _ in range(trials)]
        started = time.perf_counter()
        for trial_id in ids:
            sink = EventSink(self.sessions, trial_id)
            for event in events_per_trial:
                sink(event)
            sink.flush()
        self.settle()
        elapsed = time.perf_counter() - started
        return trials * len(events_per_trial) / elapsed

    def settle(self) -> None:
        """On SQLite, until the write-ahead log's pages are all in the database file: the
        copying is the store's work for these events, whether a commit or another thread
        does it (and a checkpoint already running makes this one return busy at once)."""
        if self.engine.dialect.name != "sqlite":
            return
        with self.engine.connect() as connection:
            while True:
                busy, pages, copied = connection.exec_driver_sql(
                    "PRAGMA wal_checkpoint(PASSIVE)"
                ).one()
                if not busy and copied == pages:
                    return
                time.sleep(0.001)

    def count(self) -> int:
        with self.sessions() as session:
            return int(
                session.scalar(
                    select(func.count())
                    .select_from(EventRow)
                    .join(Trial)
                    .where(Trial.job_id == self.job_id)
                )
                or 0
            )


def side(url: str, events_per_trial: int) -> int:
    """One side's process: ingest a chunk per request on stdin, answer its rate on stdout."""
    import service

    store = Store(url.split(":")[0], url)
    events = transcript(events_per_trial, salt=1)
    print(json.dumps({"service": str(Path(service.__file__).parent)}), flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        if "trials" in request:
            answer: dict[str, Any] = {"rate": store.ingest(events, request["trials"])}
        else:
            answer = {"count": store.count()}
        print(json.dumps(answer), flush=True)
    store.engine.dispose()
    return 0


class Side:
    """A side's process, started on a fresh store with `service` imported from `code`."""

    def __init__(self, label: str, code: Path, url: str) -> None:
        self.label = label
        self.process = subprocess.Popen(
            [sys.executable, __file__, "--side", url],
            env={**os.environ, "PYTHONPATH": str(code)},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.service = str(self._read()["service"])

    def _read(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"side {self.label} exited with {self.process.wait()}")
        answer: dict[str, Any] = json.loads(line)
        return answer

    def ask(self, request: dict[str, Any]) -> dict[str, Any]:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        return self._read()

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait()


def fresh_postgres(base: str, name: str) -> str:
    """A new database beside the URL's, for one side: both sides start from empty tables."""
    url = make_url(base)
    database = f"{url.database}_{name}_{os.getpid()}"
    admin = create_engine(url, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(text(f'CREATE DATABASE "{database}"'))
    admin.dispose()
    return url.set(database=database).render_as_string(hide_password=False)


def drop_postgres(base: str, url: str) -> None:
    """Drop a side's database. The server's autovacuum, which FORCE may not end for a role
    that is not a superuser, often analyses the new tables just then: it is waited for (a
    database left behind would be vacuumed through the next run, and slow it)."""
    admin = create_engine(make_url(base), isolation_level="AUTOCOMMIT")
    drop = text(f'DROP DATABASE IF EXISTS "{make_url(url).database}" WITH (FORCE)')
    try:
        for attempt in range(60):
            try:
                with admin.connect() as connection:
                    connection.execute(drop)
                return
            except ProgrammingError as exc:
                if "pg_signal_backend" not in str(exc) or attempt == 59:
                    raise
                time.sleep(0.5)
    finally:
        admin.dispose()


def load_average() -> list[str]:
    with open("/proc/loadavg") as loadavg:
        return loadavg.read().split()[:3]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=int, default=1_000_000, help="per side (default 1M)")
    parser.add_argument("--chunks", type=int, default=10, help="chunks per side (default 10)")
    parser.add_argument("--database-url", help="a PostgreSQL server to measure beside SQLite")
    parser.add_argument("--before", help="a checkout of the code to compare with")
    parser.add_argument(
        "--stores",
        default="sqlite,postgresql",
        help="which stores to measure (default both; postgresql needs --database-url)",
    )
    parser.add_argument("--json", help="output file (default bench/results/ingestion.json)")
    parser.add_argument("--side", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.side:
        return side(args.side, EVENTS_PER_TRIAL)

    codes = {"now": REPO}
    if args.before:
        before = Path(args.before).resolve()
        if not (before / "service" / "scheduler").is_dir():
            parser.error(f"--before {before} is not a checkout of examhall (no service/scheduler)")
        codes = {"before": before, **codes}
    trials_per_chunk = max(1, args.events // args.chunks // EVENTS_PER_TRIAL)
    total = trials_per_chunk * EVENTS_PER_TRIAL * args.chunks
    sides: list[tuple[str, str, Side]] = []  # (store kind, code, its process)
    databases: list[str] = []
    with tempfile.TemporaryDirectory(prefix="examhall-bench-") as tmp:
        try:
            stores = set(args.stores.split(","))
            for code, path in codes.items() if "sqlite" in stores else ():
                url = f"sqlite:///{Path(tmp) / f'{code}.db'}"
                sides.append(("sqlite", code, Side(f"sqlite {code}", path, url)))
            for code, path in codes.items() if args.database_url and "postgresql" in stores else ():
                databases.append(fresh_postgres(args.database_url, code))
                sides.append(("postgresql", code, Side(f"postgresql {code}", path, databases[-1])))
            load_at_start = load_average()
            print(f"load average at the start: {' '.join(load_at_start)}")
            print(
                f"{total:,} events per side in {args.chunks} chunks of {trials_per_chunk} "
                f"trials x {EVENTS_PER_TRIAL} events, sides taking turns:"
            )
            for kind, code, process in sides:
                print(f"  {kind} {code}: service from {process.service}")
            rates: dict[str, list[float]] = {p.label: [] for _, _, p in sides}
            for chunk in range(args.chunks):
                for _, _, process in sides:
                    rate = float(process.ask({"trials": trials_per_chunk})["rate"])
                    rates[process.label].append(rate)
                print(
                    f"  chunk {chunk + 1}/{args.chunks}: "
                    + ", ".join(f"{k} {v[-1]:,.0f}/s" for k, v in rates.items()),
                    flush=True,
                )
            counts = {p.label: int(p.ask({})["count"]) for _, _, p in sides}
        finally:
            for _, _, process in sides:
                process.close()
            for url in databases:
                drop_postgres(args.database_url, url)
    for label, count in counts.items():
        assert count == total, f"{label} holds {count} events, expected {total}"

    load = load_average()
    medians = {label: median(values) or 0.0 for label, values in rates.items()}
    met = {kind: medians[f"{kind} now"] >= TARGETS[kind] for kind, _, _ in sides}
    result: dict[str, Any] = {
        "events_per_side": total,
        "events_per_trial": EVENTS_PER_TRIAL,
        "chunks": args.chunks,
        "before": str(codes.get("before", "")) or None,
        "load_average_at_the_start": load_at_start,
        "load_average_at_the_end": load,
        "targets_events_per_s": {kind: TARGETS[kind] for kind in met},
        "median_events_per_s": medians,
        "chunk_events_per_s": rates,
        "met": met,
    }
    rows = [[k, medians[k], min(v), max(v)] for k, v in rates.items()]
    print()
    print(table(["side", "median events/s", "min", "max"], rows))
    print(f"load average at the end: {' '.join(load)}")
    summary = []
    for kind in met:
        now = medians[f"{kind} now"]
        line = f"{kind} {now:,.0f} events/s (target {TARGETS[kind]:,}: "
        line += "met" if met[kind] else "NOT met"
        if args.before:
            line += f"; {now / (medians[f'{kind} before'] or 1):.2f}x before"
        summary.append(line + ")")
    print("summary: " + "; ".join(summary))
    write_json("ingestion", result, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
