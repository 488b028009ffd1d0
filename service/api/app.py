"""The FastAPI control plane: jobs in, trials, events, artifacts and reports out.

Every /v1 route needs a bearer token (service/api/auth.py); a team sees only its own jobs.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Annotated, Any, Literal

import docker
from fastapi import APIRouter, Depends, FastAPI, HTTPException, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from pydantic import BaseModel
from sqlalchemy import select, text
from starlette.concurrency import run_in_threadpool

from service import __version__, config, images
from service.api import allow, metrics
from service.api.auth import UNAUTHORIZED, Admin, Caller, principal, resolve
from service.api.body_limit import BodyLimit
from service.api.context import Context, Ctx
from service.api.schemas import ErrorBody, EventView, JobCreated, JobView, TrialView
from service.api.settings import FrontSettings
from service.api.stream import JobWatch, job_events
from service.api.views import (
    cancel_job,
    get_job,
    get_trial,
    job_report,
    job_view,
    trial_view,
    visible_jobs,
)
from service.artifact_names import artifact_name_problem, content_disposition
from service.backends.docker import DockerBackend, DockerSettings
from service.domain.job_spec import JobRequest
from service.jobs import (
    JobInputError,
    check_models,
    check_plan_size,
    check_variant_count,
    create_job,
    resolve_design,
    resolve_suite,
    select_cases,
)
from service.listing import Lister, ListingBusy
from service.providers import ProviderRegistry
from service.report.model import Report
from service.report.render_text import render_text
from service.scheduler import Scheduler
from service.store.db import make_engine, migrate, session_factory
from service.store.models import Artifact, Job, Trial
from service.store.models import Event as EventRow
from service.suites import SuiteError
from service.web.routes import register_web

ADMIN_TOKEN_ENV = "EXAMHALL_ADMIN_TOKEN"


log = logging.getLogger("examhall.api")


def _progress(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _image_digest(client: docker.DockerClient, ref: str) -> str | None:
    try:
        return str(client.images.get(ref).id)
    except docker.errors.DockerException:
        return None


def create_app(
    database_url: str | None = None,
    *,
    max_containers: int | None = None,
    make_backend: Callable[[str], DockerBackend] | None = None,
    admin_token: str | None = None,
    settings: FrontSettings | None = None,
) -> FastAPI:
    """The app; the database, image and scheduler come up in its lifespan.

    `admin_token` (else $EXAMHALL_ADMIN_TOKEN) is accepted as an admin bearer token, so a
    fresh box can be used, and its teams created over the CLI, before any token exists."""
    admin_token = (
        config.token(admin_token, "admin_token")
        if admin_token
        else config.env_token(ADMIN_TOKEN_ENV)
    )
    front = settings or FrontSettings.from_env()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        providers = ProviderRegistry.load()
        engine = make_engine(database_url)
        migrate(engine)
        client = docker.from_env()
        image = images.ensure_sandbox_image(client, progress=_progress)
        backend = (
            make_backend(image) if make_backend else DockerBackend(DockerSettings(image), client)
        )
        sessions = session_factory(engine)
        scheduler = Scheduler(sessions, backend, providers, max_containers=max_containers)
        scheduler.start()
        lister = Lister(backend, scheduler, front.list_timeout_s)
        app.state.ctx = Context(
            sessions,
            backend,
            scheduler,
            image,
            _image_digest(client, image),
            providers,
            admin_token,
            front,
            lister,
        )
        try:
            yield
        finally:
            lister.close()
            scheduler.stop()
            engine.dispose()

    app = FastAPI(
        title="examhall",
        version=__version__,
        description="A containerised sandbox eval service for LLM agents.",
        lifespan=lifespan,
    )
    _routes(app)
    register_web(app)
    app.add_middleware(BodyLimit, max_bytes=front.max_body_bytes)
    return app


NOT_FOUND: dict[int | str, dict[str, Any]] = {404: {"model": ErrorBody}}
# One event of the job stream (each `data` is a JSON object; see service/api/stream.py).
SSE_EVENT: dict[str, Any] = {
    "type": "object",
    "properties": {
        "event": {"type": "string", "enum": ["trial", "counts", "report", "end"]},
        "data": {"type": "string", "contentMediaType": "application/json"},
    },
    "required": ["event", "data"],
}


def _routes(app: FastAPI) -> None:
    @app.exception_handler(RequestValidationError)
    async def validation_error(_request: Request, exc: RequestValidationError) -> JSONResponse:
        # Only where and what: echoing the input back could hold NaN, which JSON cannot carry.
        detail = [{"loc": list(e["loc"]), "msg": e["msg"], "type": e["type"]} for e in exc.errors()]
        return JSONResponse(status_code=422, content={"detail": detail})

    @app.exception_handler(JobInputError)
    async def job_input_error(_request: Request, exc: JobInputError) -> JSONResponse:
        body = {"detail": [{"loc": list(exc.loc), "msg": exc.message, "type": "value_error"}]}
        return JSONResponse(status_code=422, content=body)

    # Authentication runs before the body is read, so a caller without a token learns
    # nothing about the API beyond the 401.
    v1 = APIRouter(
        prefix="/v1",
        dependencies=[Depends(principal)],
        responses=UNAUTHORIZED,
    )

    @v1.post(
        "/jobs",
        status_code=201,
        response_model=JobCreated,
        responses={
            413: {"model": ErrorBody},
            422: {"model": ErrorBody},
            503: {"model": ErrorBody},
        },
        summary="Submit an eval job",
    )
    async def submit_job(body: JobRequest, c: Ctx, caller: Caller) -> JobCreated:
        # Async: listing may wait for a container slot and then run one for up to
        # EXAMHALL_LIST_TIMEOUT_S, which must hold neither the event loop nor a request
        # thread (service/listing.py). The short steps around it run on the thread pool.
        check_variant_count(body, c.settings.max_variants)
        bundle = await run_in_threadpool(resolve_suite, body)
        try:
            infos = await c.lister.cases(bundle, caller.team_id)
        except SuiteError as exc:
            raise JobInputError(("body", "suite"), str(exc)) from None
        except ListingBusy as exc:
            raise HTTPException(503, str(exc), headers={"Retry-After": "10"}) from None

        def plan_and_store() -> JobCreated:
            cases = select_cases(body, [info.id for info in infos], bundle.name)
            design = resolve_design(body, cases)
            check_plan_size(body, design, c.settings.max_planned_trials)
            check_models(body, design, infos, c.providers)
            with c.sessions.begin() as session:
                job = create_job(
                    session,
                    body,
                    bundle,
                    design,
                    image=c.image,
                    image_digest=c.image_digest,
                    team_id=caller.team_id,
                )
                return JobCreated(id=job.id, planned_trials=job.planned, status=job.status)

        created = await run_in_threadpool(plan_and_store)
        c.scheduler.wake()
        return created

    @v1.get("/jobs", response_model=list[JobView], summary="List jobs, newest first")
    def list_jobs(
        c: Ctx, caller: Caller, limit: Annotated[int, Query(ge=1, le=1000)] = 100
    ) -> list[JobView]:
        with c.sessions() as session:
            query = visible_jobs(caller).order_by(Job.created_at.desc()).limit(limit)
            return [job_view(session, job) for job in session.scalars(query).all()]

    @v1.get("/jobs/{job_id}", response_model=JobView, responses=NOT_FOUND)
    def get_one_job(job_id: str, c: Ctx, caller: Caller) -> JobView:
        with c.sessions() as session:
            return job_view(session, get_job(session, caller, job_id))

    @v1.delete(
        "/jobs/{job_id}",
        response_model=JobView,
        responses={**NOT_FOUND, 409: {"model": ErrorBody}},
        summary="Cancel a job",
        description="Queued trials are dropped and running ones stopped (their containers "
        "removed, their partial transcripts dropped); finished trials are kept. Cancelling a "
        "cancelled job changes nothing; a finished job cannot be cancelled (409).",
    )
    def cancel(job_id: str, c: Ctx, caller: Caller) -> JobView:
        return cancel_job(c, caller, job_id)

    @v1.get(
        "/jobs/{job_id}/stream",
        response_class=StreamingResponse,
        responses={
            200: {
                "content": {"text/event-stream": {"schema": SSE_EVENT}},
                "description": "Server-sent events: trial, counts, report, and end (last)",
            },
            **NOT_FOUND,
        },
        summary="Follow a job's progress",
    )
    def stream_job(job_id: str, request: Request, c: Ctx, caller: Caller) -> StreamingResponse:
        with c.sessions() as session:
            get_job(session, caller, job_id)

        def still_allowed() -> bool:
            # The same credential, asked again: revoked tokens and ended sessions fail.
            now = resolve(c, request)
            return now is not None and (now.admin or now.team_id == caller.team_id)

        events = job_events(
            JobWatch(c.sessions, job_id),
            request.is_disconnected,
            still_allowed,
            recheck_s=c.settings.stream_recheck_s,
        )
        return StreamingResponse(
            events,
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )

    @v1.get("/jobs/{job_id}/trials", response_model=list[TrialView], responses=NOT_FOUND)
    def job_trials(job_id: str, c: Ctx, caller: Caller) -> list[TrialView]:
        with c.sessions() as session:
            get_job(session, caller, job_id)
            trials = session.scalars(
                select(Trial).where(Trial.job_id == job_id).order_by(Trial.order, Trial.attempt)
            ).all()
            return [trial_view(session, t) for t in trials]

    @v1.get("/trials/{trial_id}", response_model=TrialView, responses=NOT_FOUND)
    def get_one_trial(trial_id: str, c: Ctx, caller: Caller) -> TrialView:
        with c.sessions() as session:
            return trial_view(session, get_trial(session, caller, trial_id))

    @v1.get("/trials/{trial_id}/events", response_model=list[EventView], responses=NOT_FOUND)
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
            rows = session.scalars(
                select(EventRow)
                .where(EventRow.trial_id == trial_id, EventRow.seq > after)
                .order_by(EventRow.seq)
                .limit(limit)
            ).all()
            return [EventView(seq=r.seq, type=r.type, payload=r.payload) for r in rows]

    @v1.get(
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
                artifact = session.scalar(
                    select(Artifact).where(Artifact.trial_id == trial_id, Artifact.name == name)
                )
            if artifact is None:
                raise HTTPException(404, f"Trial {trial_id} has no artifact {name!r}.")
            media = (
                "application/x-ndjson" if name.endswith(".jsonl") else "application/octet-stream"
            )
            # An artifact is agent-made bytes: a browser must save it, never render or sniff
            # it as a page of this origin.
            headers = {
                "ETag": artifact.sha256,
                "X-Content-Type-Options": "nosniff",
                "Content-Disposition": content_disposition(name),
            }
            return Response(artifact.content, media_type=media, headers=headers)

    @v1.get(
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
        return JSONResponse(data.model_dump(mode="json"))

    app.include_router(v1)
    allow.install(app)

    @app.get(
        "/metrics",
        response_class=PlainTextResponse,
        responses={**UNAUTHORIZED, **NOT_FOUND},
        summary="Prometheus metrics (admin token)",
    )
    def prometheus(c: Ctx, _admin: Admin) -> PlainTextResponse:
        with c.sessions() as session:
            body = metrics.render(session, c.scheduler.running_count())
        return PlainTextResponse(body, media_type="text/plain; version=0.0.4")

    @app.get(
        "/healthz",
        responses={503: {"model": Health}},
        response_model=Health,
        summary="Database and Docker engine reachable (no token needed)",
    )
    def healthz(c: Ctx) -> JSONResponse:
        checks = {"database": _check_database(c), "docker": _check_docker(c)}
        healthy = all(v == "ok" for v in checks.values())
        return JSONResponse(
            Health(status="ok" if healthy else "unavailable", **checks).model_dump(),
            status_code=200 if healthy else 503,
        )


class Health(BaseModel):
    status: Literal["ok", "unavailable"]
    database: str
    docker: str


def _check_database(c: Context) -> str:
    try:
        with c.sessions() as session:
            session.execute(text("SELECT 1"))
    except Exception as exc:  # any failure is the answer, not a crash of the probe
        return f"unreachable: {type(exc).__name__}"
    return "ok"


def _check_docker(c: Context) -> str:
    try:
        c.backend.client.ping()
    except Exception as exc:
        return f"unreachable: {type(exc).__name__}"
    return "ok"
