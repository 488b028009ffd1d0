"""A job's report, as JSON or as text for a terminal."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter
from fastapi.responses import JSONResponse, PlainTextResponse, Response

from service.api.access import NOT_FOUND, get_job
from service.api.auth import Caller
from service.api.context import Ctx
from service.report.from_store import job_report
from service.report.model import Report, report_json
from service.report.render_text import render_text

router = APIRouter()


@router.get(
    "/jobs/{job_id}/report",
    responses={
        200: {
            "model": Report,
            "content": {"text/plain": {"schema": {"type": "string"}}},
            "description": "The report as JSON, or laid out for a terminal with format=text",
        },
        **NOT_FOUND,
    },
)
def report(
    job_id: str, c: Ctx, caller: Caller, format: Literal["json", "text"] = "json"
) -> Response:
    with c.sessions() as session:
        data = job_report(session, get_job(session, caller, job_id))
    if format == "text":
        return PlainTextResponse(render_text(data))
    return JSONResponse(report_json(data))
