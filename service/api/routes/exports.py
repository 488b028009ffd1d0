"""A job's results in another tool's format: Inspect's eval log."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query
from fastapi.responses import JSONResponse

from service.api.access import NOT_FOUND, get_job
from service.api.auth import Caller
from service.api.context import Ctx
from service.artifact_names import content_disposition
from service.report.inspect_from_store import job_inspect_log
from service.report.inspect_log import log_file_name

router = APIRouter()

# Enough of the log's shape for the schema: Inspect documents the rest.
INSPECT_LOG: dict[str, Any] = {
    "type": "object",
    "properties": {
        "version": {"type": "integer"},
        "status": {"type": "string", "enum": ["started", "success", "cancelled", "error"]},
        "eval": {"type": "object"},
        "plan": {"type": "object"},
        "results": {"type": "object"},
        "stats": {"type": "object"},
        "samples": {"type": "array", "items": {"type": "object"}},
    },
    "required": ["version", "status", "eval", "samples"],
}


@router.get(
    "/jobs/{job_id}/export",
    response_class=JSONResponse,
    responses={
        200: {
            "content": {"application/json": {"schema": INSPECT_LOG}},
            "description": "Inspect's eval log (its .json format), named by Content-Disposition "
            "as Inspect names its logs",
        },
        **NOT_FOUND,
    },
    summary="Export a job's results as an Inspect eval log",
    description="One sample per trial (its latest finished attempt), rounds as epochs, a "
    "score per judge and the trial's outcome (C or I), the transcript's messages and tool "
    "calls, model usage and timings; the job's spec as the eval's task arguments and plan. "
    "A job still building, queued or running gives the trials finished so far, in a log "
    'of status "started".',
)
def export(
    job_id: str,
    c: Ctx,
    caller: Caller,
    format: Annotated[
        Literal["inspect"], Query(description="inspect: Inspect's eval log, its .json format")
    ],
) -> JSONResponse:
    with c.sessions() as session:
        job = get_job(session, caller, job_id)
        log = job_inspect_log(session, job)
        name = log_file_name(job)
    return JSONResponse(log, headers={"Content-Disposition": content_disposition(name)})
