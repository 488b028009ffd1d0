"""A job's live progress as server-sent events.

The stream polls the store rather than listening to this process's scheduler, because the
trials of one job may be run by several control planes on one database. Each poll reads the
job's change marker (its counts row's version, `service.store.counts`) and, when it moved,
only the trials changed since the last version seen, so a poll costs the store work in
proportion to what changed, not to the size of the job. Events:

- `trial`: a trial started or finished (id, case, variant, round, attempt, status, outcome);
- `build`: while the job is `building`, a task's environment build whenever its state
  changes (the task, its place in the job, waiting / building at a step / cached / built /
  failed at a step, and the seconds it took so far), as the preparer of whichever plane
  builds it wrote it on the job's row (service/scheduler/build_progress.py);
- `counts`: the job's status and counts, whenever they change;
- `report`: each variant's pass rates and each comparison's lift, when a trial finishes
  (at most every REPORT_EVERY_S, since a report reads every trial);
- `end`: the job finished or was cancelled, or the caller's token was revoked (or its web
  session ended), which the stream re-checks every EXAMHALL_STREAM_RECHECK_S; the stream
  closes after it.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from sqlalchemy.orm import Session, sessionmaker
from starlette.concurrency import run_in_threadpool

from service.api.views import job_counts
from service.domain.status import JobStatus
from service.report.from_store import job_report
from service.report.model import MetricView, Report
from service.store import counts
from service.store.jobs import find_job
from service.store.trials import started_trials

POLL_S = 0.5
REPORT_EVERY_S = 2.0
KEEPALIVE_S = 15.0
DONE = (JobStatus.FINISHED, JobStatus.CANCELLED)


def sse(event: str, data: dict[str, Any]) -> str:
    return f"event: {event}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n"


def report_summary(report: Report) -> dict[str, Any]:
    """The headline numbers of a report: small enough to send on every change."""

    def metric(m: MetricView) -> dict[str, Any]:
        return {"value": m.value, "ci95": m.ci95}

    return {
        "variants": {
            v.name: {
                "pass_at_1": metric(v.pass_at_1),
                "pass_hat_k": metric(v.pass_hat_k),
                "scored_trials": v.scored_trials,
            }
            for v in report.variants
        },
        "comparisons": [
            {
                "baseline": c.baseline,
                "candidate": c.candidate,
                "lift_pp": c.headline.lift_pp if c.headline else None,
                "lift_ci95_pp": c.headline.lift_ci95_pp if c.headline else None,
            }
            for c in report.comparisons
        ],
    }


class JobWatch:
    """What a client has been told about one job, and what has changed since."""

    def __init__(self, sessions: sessionmaker[Session], job_id: str) -> None:
        self.sessions = sessions
        self.job_id = job_id
        self.trials: dict[str, str] = {}
        self.counts: dict[str, Any] | None = None
        self.finished = -1
        self.report_at = 0.0
        # The job's version (`JobCounts.version`) this watch has read the trials up to.
        self.version = -1
        self.status: str | None = None
        self.builds: dict[str, Any] = {}

    def poll(self) -> tuple[list[str], bool]:
        """The events to send now, and whether the job is over."""
        out: list[str] = []
        with self.sessions() as session:
            # The marker first: a change committed after it is read again next time, never
            # missed (the trials' seen states drop the repeats).
            version = counts.version(session, self.job_id)
            job = find_job(session, self.job_id)
            if job is None:  # deleted under us; nothing more will come
                return [sse("end", {"status": "gone"})], True
            for case, build in (job.builds or {}).items():
                if self.builds.get(case) != build:
                    self.builds[case] = build
                    out.append(sse("build", {"case": case, **build}))
            moved = version is None or version != self.version or job.status != self.status
            report_due = self.counts is not None and self.counts["finished"] != self.finished
            if not moved and not report_due:
                return out, False  # no trial changed: the marker and the job's row, read
            for row in started_trials(session, self.job_id, self.version) if moved else ():
                if self.trials.get(row.id) != row.status:
                    self.trials[row.id] = row.status
                    out.append(sse("trial", dict(row._mapping)))
            # A job without a counts row (a bulk load) has no marker: read it all each time.
            self.version = -1 if version is None else version
            self.status = job.status
            job_state = {"status": job.status, **job_counts(session, job.id).model_dump()}
            if job_state != self.counts:
                self.counts = job_state
                out.append(sse("counts", {"planned_trials": job.planned, **job_state}))
            finished = job_state["finished"]
            over = job.status in DONE
            due = time.monotonic() - self.report_at >= REPORT_EVERY_S
            if finished != self.finished and (due or over):
                self.finished = finished
                self.report_at = time.monotonic()
                out.append(sse("report", report_summary(job_report(session, job))))
            if over:
                out.append(sse("end", {"status": job.status}))
        return out, over


async def job_events(
    watch: JobWatch,
    disconnected: Callable[[], Any],
    still_allowed: Callable[[], bool],
    *,
    recheck_s: float,
    poll_s: float = POLL_S,
) -> AsyncIterator[str]:
    """The job's events until it ends, the client goes, or `still_allowed` says the caller
    may no longer see it: a stream opened before a revocation must not outlive it."""
    last_sent = last_check = time.monotonic()
    while True:
        if time.monotonic() - last_check >= recheck_s:
            last_check = time.monotonic()
            if not await run_in_threadpool(still_allowed):
                yield sse("end", {"status": "unauthorized"})
                return
        events, over = await run_in_threadpool(watch.poll)
        for event in events:
            yield event
        if events:
            last_sent = time.monotonic()
        elif time.monotonic() - last_sent > KEEPALIVE_S:
            # A comment line: proxies and clients see the connection is alive.
            yield ": keepalive\n\n"
            last_sent = time.monotonic()
        if over or await disconnected():
            return
        await asyncio.sleep(poll_s)
