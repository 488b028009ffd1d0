"""Trials: a job's trials, one trial, its events and its artifacts."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, HTTPException, Query
from fastapi.responses import Response

from service.api.access import NOT_FOUND, get_job, get_trial
from service.api.auth import Caller
from service.api.context import Ctx
from service.api.schemas import EventView, TrialView
from service.api.views import trial_view
from service.artifact_names import artifact_name_problem, content_disposition
from service.store import trials

router = APIRouter()


@router.get("/jobs/{job_id}/trials", response_model=list[TrialView], responses=NOT_FOUND)
def job_trials(job_id: str, c: Ctx, caller: Caller) -> list[TrialView]:
    with c.sessions() as session:
        get_job(session, caller, job_id)
        return [trial_view(session, t) for t in trials.job_trials(session, job_id)]


@router.get("/trials/{trial_id}", response_model=TrialView, responses=NOT_FOUND)
def get_one_trial(trial_id: str, c: Ctx, caller: Caller) -> TrialView:
    with c.sessions() as session:
        return trial_view(session, get_trial(session, caller, trial_id))


@router.get("/trials/{trial_id}/events", response_model=list[EventView], responses=NOT_FOUND)
def trial_events(
    trial_id: str,
    c: Ctx,
    caller: Caller,
    # Bounded by the seq column's type (a 32-bit integer on PostgreSQL).
    after: Annotated[
        int, Query(ge=0, le=2**31 - 1, description="only events with seq > after")
    ] = 0,
    limit: Annotated[int, Query(ge=1, le=10_000)] = 1000,
) -> list[EventView]:
    with c.sessions() as session:
        get_trial(session, caller, trial_id)
        rows = trials.events_after(session, trial_id, after, limit)
        return [EventView(seq=r.seq, type=r.type, payload=r.payload) for r in rows]


@router.get(
    "/trials/{trial_id}/artifacts/{name}",
    response_class=Response,
    responses={
        200: {
            "content": {
                "application/octet-stream": {"schema": {"type": "string", "format": "binary"}},
                "application/x-ndjson": {"schema": {"type": "string"}},
            },
            "description": "The artifact's bytes (.jsonl files as application/x-ndjson)",
        },
        **NOT_FOUND,
    },
)
def trial_artifact(trial_id: str, name: str, c: Ctx, caller: Caller) -> Response:
    with c.sessions() as session:
        get_trial(session, caller, trial_id)
        artifact = None
        if artifact_name_problem(name) is None:
            artifact = trials.find_artifact(session, trial_id, name)
        if artifact is None:
            raise HTTPException(404, f"Trial {trial_id} has no artifact {name!r}.")
        media = "application/x-ndjson" if name.endswith(".jsonl") else "application/octet-stream"
        # An artifact is agent-made bytes: a browser must save it, never render or sniff
        # it as a page of this origin.
        headers = {
            "ETag": artifact.sha256,
            "X-Content-Type-Options": "nosniff",
            "Content-Disposition": content_disposition(name),
        }
        return Response(artifact.content, media_type=media, headers=headers)
