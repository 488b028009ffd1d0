"""Cancelling a job, for the API and the web UI alike."""

from __future__ import annotations

from fastapi import HTTPException

from service.api.access import get_job
from service.api.context import Context
from service.domain.status import JobStatus
from service.store.jobs import mark_cancelled
from service.teams import Principal


def cancel_job(c: Context, caller: Principal, job_id: str) -> None:
    """Drop the job's queued trials and stop its running ones; keep what finished. A finished
    job cannot be cancelled (409); cancelling a cancelled one changes nothing."""
    with c.sessions.begin() as session:
        job = get_job(session, caller, job_id)
        if job.status == JobStatus.FINISHED:
            raise HTTPException(409, f"Job {job_id} has finished; there is nothing to cancel.")
        mark_cancelled(session, job)
    # Our own containers die now; other control planes see the status on their next loop and
    # kill theirs. A running trial's row goes when its run returns (the scheduler drops it).
    c.scheduler.cancel(job_id)
    if c.preparer is not None:
        c.preparer.wake()  # a build of the job's stops now, not at the next poll
