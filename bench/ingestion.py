"""Ingestion: events per second into the store through the scheduler's EventSink.

    python3 bench/ingestion.py [--events 1000000] [--database-url postgresql+psycopg://...]

Each trial gets its own `service.scheduler.EventSink`, fed a transcript of synthetic
`sandbox.protocol` events (assistant messages with tool calls and usage, tool calls, tool
results of a few hundred bytes to a few kilobytes, lifecycle events) and flushed at its end,
as the scheduler does. SQLite is a fresh WAL database under a temporary directory. With
`--database-url` (an empty database; its tables are created by the migrations), the events
are split into chunks that alternate between SQLite and that store (A B A B ...), and the
table gives each store's median chunk rate and the ratio.
"""

from __future__ import annotations

import argparse
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from _common import median, table, write_json
from sqlalchemy import func, select
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

TARGET_EVENTS_PER_S = 20_000
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
        elapsed = time.perf_counter() - started
        return trials * len(events_per_trial) / elapsed

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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=int, default=1_000_000, help="per store (default 1M)")
    parser.add_argument("--chunks", type=int, default=10, help="chunks per store (default 10)")
    parser.add_argument("--database-url", help="a second store to compare, e.g. PostgreSQL")
    parser.add_argument("--json", help="output file (default bench/results/ingestion.json)")
    args = parser.parse_args()

    events = transcript(EVENTS_PER_TRIAL, salt=1)
    trials_per_chunk = max(1, args.events // args.chunks // EVENTS_PER_TRIAL)
    with tempfile.TemporaryDirectory(prefix="examhall-bench-") as tmp:
        stores = [Store("sqlite", f"sqlite:///{Path(tmp) / 'bench.db'}")]
        if args.database_url:
            stores.append(Store(args.database_url.split(":")[0], args.database_url))
        total = trials_per_chunk * EVENTS_PER_TRIAL * args.chunks
        print(
            f"{total:,} events per store in {args.chunks} chunks of {trials_per_chunk} trials "
            f"x {EVENTS_PER_TRIAL} events, stores alternating: "
            + ", ".join(s.label for s in stores)
        )
        rates: dict[str, list[float]] = {s.label: [] for s in stores}
        for chunk in range(args.chunks):
            for store in stores:
                rates[store.label].append(store.ingest(events, trials_per_chunk))
            print(
                f"  chunk {chunk + 1}/{args.chunks}: "
                + ", ".join(f"{k} {v[-1]:,.0f}/s" for k, v in rates.items())
            )
        counts = {s.label: s.count() for s in stores}
        for store in stores:
            store.engine.dispose()
    for label, count in counts.items():
        assert count == total, f"{label} holds {count} events, expected {total}"

    result: dict[str, Any] = {
        "events_per_store": total,
        "events_per_trial": EVENTS_PER_TRIAL,
        "chunks": args.chunks,
        "target_events_per_s": TARGET_EVENTS_PER_S,
        "median_events_per_s": {k: median(v) for k, v in rates.items()},
        "chunk_events_per_s": rates,
        "met": (median(rates["sqlite"]) or 0) >= TARGET_EVENTS_PER_S,
    }
    rows = [[k, median(v), min(v), max(v)] for k, v in rates.items()]
    print()
    print(table(["store", "median events/s", "min", "max"], rows))
    if len(stores) == 2:
        other = stores[1].label
        ratio = (median(rates[other]) or 0) / (median(rates["sqlite"]) or 1)
        result["ratio_vs_sqlite"] = {other: ratio}
        print(f"\n{other} / sqlite: {ratio:.2f}x")
    print(f"target: >= {TARGET_EVENTS_PER_S:,} events/s into SQLite")
    write_json("ingestion", result, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
