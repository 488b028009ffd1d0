"""Prometheus metrics, in the text exposition format (0.0.4), read from the store.

Counts come from the database rather than from counters in this process, so they survive a
restart and agree across control planes sharing one store. Only `examhall_containers_running`
is this process's own.
"""

from __future__ import annotations

from sqlalchemy import case, func, select
from sqlalchemy.orm import Session

from service.store.models import Job, Trial
from service.store.queries import dict_of

# Trial wall times run from under a second (a trivial trial) to the longest agent timeouts.
DURATION_BUCKETS = (0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 1800.0)
OUTCOMES = ("passed", "failed", "error")


def _line(name: str, value: float, **labels: str) -> str:
    # repr keeps every digit of a float; Prometheus parses it as Go's ParseFloat does.
    number = repr(float(value)) if isinstance(value, float) else str(int(value))
    if labels:
        inner = ",".join(f'{k}="{v}"' for k, v in labels.items())
        return f"{name}{{{inner}}} {number}"
    return f"{name} {number}"


def render(session: Session, containers_running: int) -> str:
    lines: list[str] = []

    def family(name: str, kind: str, help_text: str) -> None:
        lines.extend([f"# HELP {name} {help_text}", f"# TYPE {name} {kind}"])

    by_outcome = dict_of(
        session,
        select(Trial.outcome, func.count())
        .where(Trial.status == "finished")
        .group_by(Trial.outcome),
    )
    family("examhall_trials_total", "counter", "Finished trial attempts, by outcome.")
    for outcome in OUTCOMES:
        lines.append(_line("examhall_trials_total", by_outcome.get(outcome, 0), outcome=outcome))

    by_status = dict_of(
        session,
        select(Trial.status, func.count())
        .where(Trial.status.in_(("queued", "running")))
        .group_by(Trial.status),
    )
    family("examhall_queue_depth", "gauge", "Trials waiting for a container.")
    lines.append(_line("examhall_queue_depth", by_status.get("queued", 0)))
    family("examhall_trials_running", "gauge", "Trials running, across every control plane.")
    lines.append(_line("examhall_trials_running", by_status.get("running", 0)))
    family("examhall_containers_running", "gauge", "Sandbox containers this control plane runs.")
    lines.append(_line("examhall_containers_running", containers_running))

    jobs = dict_of(session, select(Job.status, func.count()).group_by(Job.status))
    family("examhall_jobs", "gauge", "Jobs, by status.")
    for status in ("queued", "running", "finished", "cancelled"):
        lines.append(_line("examhall_jobs", jobs.get(status, 0), status=status))

    timed = Trial.wall_s.is_not(None) & (Trial.status == "finished")
    columns = [func.sum(case((Trial.wall_s <= b, 1), else_=0)) for b in DURATION_BUCKETS]
    row = session.execute(
        select(func.count(), func.coalesce(func.sum(Trial.wall_s), 0.0), *columns).where(timed)
    ).one()
    count, total, cumulative = row[0], row[1], row[2:]
    family("examhall_trial_duration_seconds", "histogram", "Wall time of finished trials.")
    for bucket, value in zip(DURATION_BUCKETS, cumulative, strict=True):
        lines.append(_line("examhall_trial_duration_seconds_bucket", value or 0, le=f"{bucket:g}"))
    lines.append(_line("examhall_trial_duration_seconds_bucket", count, le="+Inf"))
    lines.append(_line("examhall_trial_duration_seconds_sum", total))
    lines.append(_line("examhall_trial_duration_seconds_count", count))
    return "\n".join(lines) + "\n"
