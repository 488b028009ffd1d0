"""The UI's routes under /ui, as a router that service/app.py includes.

They read the store with the API's own scoping (service/api/access.py), so a team sees the
same jobs here as over the API, and another team's job is "not found" in both. Signing in
with an API token opens a server-side session (service/api/sessions.py) whose id is kept in
an HttpOnly, SameSite=Strict cookie; the API accepts it for reads, so artifact links work.
Every form post (sign in, sign out, cancel) must come from this origin (service/web/csrf.py).
"""

from __future__ import annotations

import re
from typing import Annotated
from urllib.parse import parse_qs, quote

from fastapi import APIRouter, Depends, HTTPException, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from starlette.concurrency import run_in_threadpool

from service.api.access import get_job, get_trial, newest_jobs
from service.api.auth import resolve
from service.api.cancel import cancel_job
from service.api.context import Context, Ctx
from service.api.schemas import EventView
from service.api.sessions import SESSION_COOKIE, close_session, open_session
from service.api.views import job_view, trial_view
from service.domain.job_spec import JobSpec
from service.domain.status import JobStatus
from service.report.from_store import job_report
from service.store import counts
from service.store.jobs import find_job
from service.store.metrics import queue_by_team
from service.store.reports import trial_events
from service.store.reviews import reviews_marker
from service.store.trials import grid_trials
from service.teams import Principal, authenticate
from service.web import pages
from service.web.artifact_text import artifact_facts
from service.web.csrf import cross_site_problem
from service.web.page_cache import JOB_PAGES

JOBS_SHOWN = 200
# A transcript longer than this is cut on the page; session.jsonl has all of it.
EVENTS_SHOWN = 5000
# A login form is one token; anything much larger is not one.
MAX_FORM_BYTES = 16 * 1024
# No script may run on a UI page, whatever a transcript manages to smuggle into it.
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; "
    "img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    "X-Content-Type-Options": "nosniff",
    # Never to another site; but within this origin, because under "no-referrer" a browser
    # sends `Origin: null` with its form posts, which the cross-site check must refuse.
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}
_LOCAL_UI_PATH = re.compile(r"/ui/[A-Za-z0-9/_.\-]*")


class LoginRequired(Exception):
    """No valid token came with a UI request; the browser is sent to the login form."""

    def __init__(self, next_url: str) -> None:
        super().__init__(next_url)
        self.next_url = next_url


class CrossSite(Exception):
    """A form post from another origin: refused before anything is read or changed."""


def same_origin(request: Request, c: Ctx) -> None:
    if (problem := cross_site_problem(request, c.settings.cookie_secure)) is not None:
        raise CrossSite(problem)


SameOrigin = Depends(same_origin)


def ui_principal(request: Request, c: Ctx) -> Principal:
    found = resolve(c, request)
    if found is None:
        # After login the browser GETs `next`; a form's target cannot be replayed that way.
        raise LoginRequired(request.url.path if request.method == "GET" else "/ui/jobs")
    return found


UiCaller = Annotated[Principal, Depends(ui_principal)]


def safe_next(value: str | None) -> str:
    """Where to go after login: only a UI path here, so the form cannot redirect offsite."""
    if value and _LOCAL_UI_PATH.fullmatch(value) and "//" not in value:
        return value
    return "/ui/jobs"


def html(body: str, status_code: int = 200) -> HTMLResponse:
    return HTMLResponse(body, status_code=status_code, headers=SECURITY_HEADERS)


def redirect(url: str) -> RedirectResponse:
    return RedirectResponse(url, status_code=303, headers={"Cache-Control": "no-store"})


async def form_fields(request: Request) -> dict[str, str]:
    """An urlencoded form's fields (first value each), without python-multipart."""
    body = await request.body()
    if len(body) > MAX_FORM_BYTES:
        raise HTTPException(413, "The form is too large.")
    parsed = parse_qs(body.decode("utf-8", "replace"), max_num_fields=20)
    return {name: values[0] for name, values in parsed.items()}


def _job_page(c: Context, caller: Principal, job_id: str) -> HTMLResponse:
    with c.sessions() as session:
        try:
            job = get_job(session, caller, job_id)
        except HTTPException as exc:
            return html(pages.not_found_page(str(exc.detail), caller.name), exc.status_code)
        # The marker is read first: what is read after it is at least as new.
        version = counts.version(session, job.id)
        reviewed = reviews_marker(session, job.id)
        # A building job's page tells its builds' steps and seconds, which change each
        # second without its marker: rendered anew every time until it is built.
        building = job.status == JobStatus.BUILDING
        key = (
            None
            if version is None or building
            else (job.id, job.status, version, reviewed, caller.name)
        )
        if key is not None and (kept := JOB_PAGES.get(key)) is not None:
            return html(kept)
        spec = JobSpec.model_validate(job.spec)
        trials = grid_trials(session, job.id, pages.variant_order(spec), pages.grid_orders(spec))
        page = pages.job_page(job_view(session, job), job_report(session, job), trials, caller.name)
        if key is not None:
            JOB_PAGES.put(key, page)
        return html(page)


def _trial_page(c: Context, caller: Principal, trial_id: str) -> HTMLResponse:
    with c.sessions() as session:
        try:
            trial = get_trial(session, caller, trial_id)
        except HTTPException as exc:
            return html(pages.not_found_page(str(exc.detail), caller.name), exc.status_code)
        job = find_job(session, trial.job_id)
        if job is None:
            return html(pages.not_found_page(f"No trial {trial_id}.", caller.name), 404)
        rows = trial_events(session, trial.id, EVENTS_SHOWN)
        events = [EventView(seq=r.seq, type=r.type, payload=r.payload) for r in rows]
        view = trial_view(session, trial)
        return html(
            pages.trial_page(
                view,
                job_view(session, job),
                events,
                caller.name,
                image=pages.environment_image(view, job.image, job.image_digest),
                artifacts=artifact_facts(session, trial.id),
                shown_limit=EVENTS_SHOWN,
            )
        )


# Pages, not API: left out of the OpenAPI schema. service/app.py includes the router.
router = APIRouter(include_in_schema=False)


async def login_required(request: Request, exc: Exception) -> Response:
    target = exc.next_url if isinstance(exc, LoginRequired) else "/ui/jobs"
    response = redirect(f"/ui/login?next={quote(safe_next(target), safe='/')}")
    if request.cookies.get(SESSION_COOKIE):
        # An expired or ended session: drop it so the browser stops presenting it.
        response.delete_cookie(SESSION_COOKIE, path="/")
    return response


async def cross_site(_request: Request, exc: Exception) -> Response:
    message = f"{exc} Use the form on this site's own page."
    return html(pages.refused_page(message), 403)


@router.get("/")
def root() -> RedirectResponse:
    return redirect("/ui/jobs")


@router.get("/ui")
def ui_root() -> RedirectResponse:
    return redirect("/ui/jobs")


@router.get("/ui/login")
def login_form(next: str | None = None) -> HTMLResponse:
    return html(pages.login_page(next_url=safe_next(next)))


@router.post("/ui/login", dependencies=[SameOrigin])
async def login(request: Request, c: Ctx) -> Response:
    fields = await form_fields(request)
    token = fields.get("token", "").strip()
    target = safe_next(fields.get("next"))
    settings = c.settings

    def sign_in() -> str | None:
        with c.sessions.begin() as session:
            if authenticate(session, token, c.admin_token) is None:
                return None
            return open_session(session, token, settings.session_ttl_s)

    session_id = await run_in_threadpool(sign_in) if token else None
    if session_id is None:
        page = pages.login_page("That token is unknown or revoked.", target)
        return html(page, 401)
    response = redirect(target)
    response.set_cookie(
        SESSION_COOKIE,
        session_id,
        max_age=settings.session_ttl_s,
        httponly=True,
        samesite="strict",
        # Behind a TLS proxy the request arrives as plain HTTP: the setting says so.
        secure=settings.cookie_secure or request.url.scheme == "https",
        path="/",
    )
    return response


@router.post("/ui/logout", dependencies=[SameOrigin])
def logout(request: Request, c: Ctx) -> RedirectResponse:
    if session_id := request.cookies.get(SESSION_COOKIE):
        with c.sessions.begin() as session:
            close_session(session, session_id)
    response = redirect("/ui/login")
    response.delete_cookie(SESSION_COOKIE, path="/")
    return response


@router.get("/ui/jobs")
def jobs(c: Ctx, caller: UiCaller) -> HTMLResponse:
    with c.sessions() as session:
        views = [job_view(session, job) for job in newest_jobs(session, caller, JOBS_SHOWN)]
        queue = queue_by_team(session)
    shown = queue if caller.admin else pages.own_queue(queue, caller.name)
    return html(pages.jobs_page(views, caller.name, shown))


@router.get("/ui/jobs/{job_id}")
def job(job_id: str, c: Ctx, caller: UiCaller) -> HTMLResponse:
    return _job_page(c, caller, job_id)


@router.post("/ui/jobs/{job_id}/cancel", dependencies=[SameOrigin])
def cancel(job_id: str, c: Ctx, caller: UiCaller) -> Response:
    try:
        cancel_job(c, caller, job_id)
    except HTTPException as exc:
        if exc.status_code == 404:
            return html(pages.not_found_page(str(exc.detail), caller.name), 404)
        # 409: it finished meanwhile; its page shows that.
    return redirect(f"/ui/jobs/{quote(job_id, safe='')}")


@router.get("/ui/trials/{trial_id}")
def trial(trial_id: str, c: Ctx, caller: UiCaller) -> HTMLResponse:
    return _trial_page(c, caller, trial_id)


# The app's handlers for what the pages' dependencies raise (service/app.py installs them).
EXCEPTION_HANDLERS = {LoginRequired: login_required, CrossSite: cross_site}
