"""The review pages' routes under /ui: a job's review queue, drawing a sample, and a sampled
trial's review page with its form.

Reads use the session cookie, as every UI page. The two forms write, and a browser cannot
send the API's bearer token, so they post to these /ui routes (never to /v1, where a write
with the cookie alone answers 403) and pass the same cross-site refusal as sign-in and
cancel (service/web/csrf.py): a form post from any other origin is refused before anything
is read or changed. The review is recorded as the web session's token's (its team and
prefix, "via web") with the name the reviewer typed; that token is also the reviewer a blind
sample hides verdicts from (service/review/blindness.py).
"""

from __future__ import annotations

import re
from urllib.parse import parse_qs, quote

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import HTMLResponse, Response
from pydantic import ValidationError
from starlette.concurrency import run_in_threadpool

from service.api.access import get_job, get_trial
from service.api.context import Context, Ctx
from service.api.review_schemas import ReviewRequest, SampleRequest
from service.api.reviewer import Reviewer, reviewer_of
from service.api.reviewing import (
    create_sample,
    job_review_views,
    post_review,
    record_sample,
    sample_view,
    shown_to,
)
from service.api.schemas import EventView
from service.api.views import job_view, trial_view
from service.domain.planner import JobInputError
from service.report.from_store import job_report
from service.store.jobs import find_job
from service.store.reports import trial_events
from service.teams import Principal
from service.web import pages, review_pages
from service.web.artifact_text import artifact_facts
from service.web.review_pages import ReviewForm
from service.web.routes import EVENTS_SHOWN, SameOrigin, UiCaller, html, redirect

# A review's note may be 4000 characters, which urlencoded UTF-8 can make nine times longer.
MAX_REVIEW_FORM_BYTES = 64 * 1024
# A sample's size and seed as the form may give them: whole numbers, of at most 9 digits.
_WHOLE = re.compile(r"[0-9]{1,9}")
# How the draw form replaces a sample of record (the API says it its own way).
REPLACE_IN_THE_FORM = "tick the box to retire it and draw again"


async def _fields(request: Request) -> dict[str, str] | None:
    """The form's fields (first value each), or None when the body is too large to be one."""
    body = await request.body()
    if len(body) > MAX_REVIEW_FORM_BYTES:
        return None
    parsed = parse_qs(body.decode("utf-8", "replace"), max_num_fields=10)
    return {name: values[0] for name, values in parsed.items()}


def _problem(exc: ValidationError) -> str:
    error = exc.errors()[0]
    field = ".".join(str(part) for part in error["loc"])
    return f"{field}: {error['msg']}"


def _queue(
    c: Context,
    request: Request,
    caller: Principal,
    job_id: str,
    *,
    error: str | None = None,
    status: int = 200,
    draw: review_pages.DrawForm | None = None,
) -> HTMLResponse:
    with c.sessions() as session:
        try:
            job = get_job(session, caller, job_id)
        except HTTPException as exc:
            return html(pages.not_found_page(str(exc.detail), caller.name), 404)
        sample = record_sample(session, caller, job_id)
        viewer = reviewer_of(session, request, caller, "web")
        page = review_pages.queue_page(
            job_view(session, job),
            job_report(session, job),
            sample_view(session, sample, viewer) if sample else None,
            caller.name,
            error=error,
            draw=draw,
        )
    return html(page, status)


def _review(
    c: Context,
    request: Request,
    caller: Principal,
    trial_id: str,
    *,
    form: ReviewForm | None = None,
    error: str | None = None,
    status: int = 200,
) -> HTMLResponse:
    with c.sessions() as session:
        try:
            trial = get_trial(session, caller, trial_id)
        except HTTPException as exc:
            return html(pages.not_found_page(str(exc.detail), caller.name), 404)
        job = find_job(session, trial.job_id)
        if job is None:
            return html(pages.not_found_page(f"No trial {trial_id}.", caller.name), 404)
        viewer = reviewer_of(session, request, caller, "web")
        record = record_sample(session, caller, job.id)
        in_sample = record is not None and trial.id in record.trial_ids
        history = [
            view
            for view in job_review_views(session, caller, job.id, history=True)
            if view.trial_id == trial.id and record is not None and view.sample_id == record.id
        ]
        rows = trial_events(session, trial.id, EVENTS_SHOWN)
        page = review_pages.review_page(
            trial_view(session, trial),
            job_view(session, job),
            [EventView(seq=r.seq, type=r.type, payload=r.payload) for r in rows],
            history,
            caller.name,
            in_sample=in_sample,
            # A trial outside the sample is under no review here: nothing to hide.
            verdict_shown=not in_sample
            or (record is not None and shown_to(session, record, trial.id, viewer)),
            mine=(viewer.team, viewer.token_prefix),
            shown_limit=EVENTS_SHOWN,
            artifacts=artifact_facts(session, trial.id),
            form=form,
            error=error,
        )
    return html(page, status)


def _next_url(c: Context, viewer: Reviewer, caller: Principal, job_id: str, after: str) -> str:
    """The next trial of the queue still to review after `after`, else the queue itself."""
    queue = f"/ui/jobs/{quote(job_id, safe='')}/review"
    with c.sessions() as session:
        sample = record_sample(session, caller, job_id)
        if sample is None:
            return queue
        entries = sample_view(session, sample, viewer).trials
    ids = [entry.trial_id for entry in entries]
    start = ids.index(after) + 1 if after in ids else 0
    for entry in entries[start:] + entries[:start]:
        if entry.review is None:
            return f"/ui/trials/{quote(entry.trial_id, safe='')}/review"
    return queue


# Pages, not API: left out of the OpenAPI schema. service/app.py includes the router.
router = APIRouter(include_in_schema=False)


@router.get("/ui/jobs/{job_id}/review")
def queue(job_id: str, request: Request, c: Ctx, caller: UiCaller) -> HTMLResponse:
    return _queue(c, request, caller, job_id)


@router.post("/ui/jobs/{job_id}/review-sample", dependencies=[SameOrigin])
async def draw(job_id: str, request: Request, c: Ctx, caller: UiCaller) -> Response:
    fields = await _fields(request) or {}
    form = review_pages.DrawForm(
        size=fields.get("size", ""),
        seed=fields.get("seed", ""),
        # Blind unless the form says otherwise in so many words: a post that leaves the
        # field out draws blind, as the API does.
        blind=fields.get("visibility", "blind") != "open",
        replace=fields.get("replace", "") == "yes",
    )

    def store() -> Response:
        def refused(error: str, status: int) -> Response:
            return _queue(c, request, caller, job_id, error=error, status=status, draw=form)

        # ASCII digits only: str.isdigit takes "²" and "①", which int() then refuses.
        if not (_WHOLE.fullmatch(form.size.strip()) and _WHOLE.fullmatch(form.seed.strip())):
            return refused("size and seed: enter whole numbers; no sample was drawn.", 422)
        try:
            body = SampleRequest.model_validate(
                {
                    "size": int(form.size),
                    "seed": int(form.seed),
                    "blind": form.blind,
                    "replace": form.replace,
                }
            )
        except ValidationError as exc:
            return refused(_problem(exc), 422)
        try:
            with c.sessions.begin() as session:
                viewer = reviewer_of(session, request, caller, "web")
                create_sample(
                    session, caller, job_id, body, viewer, how_to_replace=REPLACE_IN_THE_FORM
                )
        except HTTPException as exc:
            if exc.status_code == 404:
                return html(pages.not_found_page(str(exc.detail), caller.name), 404)
            return refused(str(exc.detail), exc.status_code)
        return redirect(f"/ui/jobs/{quote(job_id, safe='')}/review")

    return await run_in_threadpool(store)


@router.get("/ui/trials/{trial_id}/review")
def review_form(trial_id: str, request: Request, c: Ctx, caller: UiCaller) -> HTMLResponse:
    return _review(c, request, caller, trial_id)


@router.post("/ui/trials/{trial_id}/review", dependencies=[SameOrigin])
async def review(trial_id: str, request: Request, c: Ctx, caller: UiCaller) -> Response:
    fields = await _fields(request)

    def store() -> Response:
        if fields is None:
            return _review(c, request, caller, trial_id, error="The form is too large.", status=413)
        form = ReviewForm(
            fields.get("verdict", ""), fields.get("note", ""), fields.get("reviewer", "")
        )
        if form.verdict not in ("pass", "fail"):
            error = "Choose pass or fail before saving; nothing was saved."
            return _review(c, request, caller, trial_id, form=form, error=error, status=422)
        try:
            body = ReviewRequest.model_validate(
                {
                    "trial_id": trial_id,
                    "verdict": form.verdict,
                    "note": form.note,
                    "reviewer": form.reviewer,
                }
            )
        except ValidationError as exc:
            error = f"{_problem(exc)}; nothing was saved."
            return _review(c, request, caller, trial_id, form=form, error=error, status=422)
        with c.sessions.begin() as session:
            try:
                trial = get_trial(session, caller, trial_id)
            except HTTPException as exc:
                return html(pages.not_found_page(str(exc.detail), caller.name), 404)
            job_id = trial.job_id
            who = reviewer_of(session, request, caller, "web")
            try:
                post_review(session, caller, job_id, body, who)
            except JobInputError as exc:
                failed: str | None = exc.message
            else:
                failed = None
        if failed is not None:
            return _review(c, request, caller, trial_id, form=form, error=failed, status=422)
        return redirect(_next_url(c, who, caller, job_id, trial_id))

    return await run_in_threadpool(store)
