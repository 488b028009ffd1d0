"""The FastAPI control plane: jobs in, trials, events, artifacts and reports out."""

from __future__ import annotations

import logging
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

import docker
from fastapi import Depends, FastAPI, HTTPException, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from service import __version__, images
from service.api.report_schema import Report
from service.api.schemas import (
    ErrorBody,
    EventView,
    JobCreated,
    JobRequest,
    JobView,
    TrialCounts,
    TrialView,
)
from service.backends.docker import DockerBackend, DockerSettings
from service.jobs import (
    JobInputError,
    check_models,
    create_job,
    resolve_design,
    resolve_suite,
    select_cases,
)
from service.providers import ProviderRegistry
from service.report.build import JobFacts, TrialFacts, build_report, final_attempts, render_text
from service.scheduler import Scheduler
from service.store.db import make_engine, migrate, session_factory
from service.store.models import Artifact, Job, Trial
from service.store.models import Event as EventRow
from service.suites import SuiteError, list_cases

log = logging.getLogger("examhall.api")


@dataclass
class Context:
    sessions: sessionmaker[Session]
    backend: DockerBackend
    scheduler: Scheduler
    image: str
    image_digest: str | None
    providers: ProviderRegistry


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
) -> FastAPI:
    """The app; the database, image and scheduler come up in its lifespan."""

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
        app.state.ctx = Context(
            sessions, backend, scheduler, image, _image_digest(client, image), providers
        )
        try:
            yield
        finally:
            scheduler.stop()
            engine.dispose()

    app = FastAPI(
        title="examhall",
        version=__version__,
        description="A containerised sandbox eval service for LLM agents.",
        lifespan=lifespan,
    )
    _routes(app)
    return app


def ctx(request: Request) -> Context:
    context: Context = request.app.state.ctx
    return context


Ctx = Annotated[Context, Depends(ctx)]
NOT_FOUND: dict[int | str, dict[str, Any]] = {404: {"model": ErrorBody}}


def _job_view(session: Session, job: Job) -> JobView:
    rows = session.execute(
        select(Trial.variant, Trial.order, Trial.attempt, Trial.status, Trial.outcome).where(
            Trial.job_id == job.id
        )
    ).all()
    # Count planned trials by their latest attempt, so a retry never counts twice and the
    # progress bar only reaches the end when the retries have run.
    counts = TrialCounts(attempts=len(rows))
    for row in final_attempts(rows):
        setattr(counts, row.status, getattr(counts, row.status) + 1)
        if row.outcome:
            setattr(counts, row.outcome, getattr(counts, row.outcome) + 1)
    return JobView(
        id=job.id,
        status=job.status,  # type: ignore[arg-type]
        suite=job.suite_name,
        suite_sha256=job.suite_sha256,
        spec=job.spec,
        planned_trials=job.planned,
        counts=counts,
        created_at=job.created_at,
        finished_at=job.finished_at,
    )


def _trial_view(session: Session, trial: Trial) -> TrialView:
    names = session.scalars(
        select(Artifact.name).where(Artifact.trial_id == trial.id).order_by(Artifact.name)
    ).all()
    fields = {name: getattr(trial, name) for name in TrialView.model_fields if name != "artifacts"}
    return TrialView(**fields, artifacts=list(names))


def _get_job(session: Session, job_id: str) -> Job:
    job = session.get(Job, job_id)
    if job is None:
        raise HTTPException(404, f"No job {job_id}.")
    return job


def _get_trial(session: Session, trial_id: str) -> Trial:
    trial = session.get(Trial, trial_id)
    if trial is None:
        raise HTTPException(404, f"No trial {trial_id}.")
    return trial


def _model_text(spec: dict[str, Any]) -> str:
    """The job's model, or each arm's when the variants name their own."""
    arms = {
        name: f"{h['model']['provider']}/{h['model']['id']}" for name, h in spec["variants"].items()
    }
    if len(set(arms.values())) == 1:
        return next(iter(arms.values()))
    return ", ".join(f"{name}: {model}" for name, model in arms.items())


def job_report(session: Session, job: Job) -> dict[str, Any]:
    trials = session.scalars(select(Trial).where(Trial.job_id == job.id)).all()
    facts = JobFacts(
        id=job.id,
        status=job.status,
        suite_name=job.suite_name,
        suite_sha256=job.suite_sha256,
        rounds=job.rounds,
        seed=job.seed,
        planned=job.planned,
        model=_model_text(job.spec),
        image=job.image,
        image_digest=job.image_digest,
        service_version=job.service_version,
        created_at=job.created_at,
        baseline=job.spec.get("baseline"),
        arms=tuple(job.spec.get("arms") or ()),
        docs_sha256=job.spec.get("docs_sha256"),
        docs_name=job.spec.get("docs_name"),
    )
    return build_report(
        facts,
        [
            TrialFacts(
                t.case_id,
                t.variant,
                t.round,
                t.order,
                t.attempt,
                t.status,
                t.outcome,
                t.error_kind,
                t.model_returned,
                input_tokens=(t.usage or {}).get("input_tokens"),
                output_tokens=(t.usage or {}).get("output_tokens"),
                tool_calls=t.tool_calls,
                latency_s=(t.timings or {}).get("run_agent"),
                system_prompt_sha256=t.system_prompt_sha256,
                limits_hit=tuple(t.limits_hit or ()),
                cost_usd=(t.usage or {}).get("cost_usd"),
            )
            for t in trials
        ],
        case_order=job.spec["cases"],
        generated_at=datetime.now(UTC).replace(tzinfo=None),
    )


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

    @app.post(
        "/v1/jobs",
        status_code=201,
        response_model=JobCreated,
        responses={422: {"model": ErrorBody}},
        summary="Submit an eval job",
    )
    def submit_job(body: JobRequest, c: Ctx) -> JobCreated:
        try:
            bundle = resolve_suite(body)
            infos = list_cases(c.backend, bundle)
        except SuiteError as exc:
            raise JobInputError(("body", "suite"), str(exc)) from None
        cases = select_cases(body, [info.id for info in infos], bundle.name)
        design = resolve_design(body, cases)
        check_models(body, design, infos, c.providers)
        with c.sessions.begin() as session:
            job = create_job(
                session, body, bundle, design, image=c.image, image_digest=c.image_digest
            )
            created = JobCreated(id=job.id, planned_trials=job.planned, status=job.status)
        c.scheduler.wake()
        return created

    @app.get("/v1/jobs", response_model=list[JobView], summary="List jobs, newest first")
    def list_jobs(c: Ctx, limit: Annotated[int, Query(ge=1, le=1000)] = 100) -> list[JobView]:
        with c.sessions() as session:
            jobs = session.scalars(select(Job).order_by(Job.created_at.desc()).limit(limit)).all()
            return [_job_view(session, job) for job in jobs]

    @app.get("/v1/jobs/{job_id}", response_model=JobView, responses=NOT_FOUND)
    def get_job(job_id: str, c: Ctx) -> JobView:
        with c.sessions() as session:
            return _job_view(session, _get_job(session, job_id))

    @app.get("/v1/jobs/{job_id}/trials", response_model=list[TrialView], responses=NOT_FOUND)
    def job_trials(job_id: str, c: Ctx) -> list[TrialView]:
        with c.sessions() as session:
            _get_job(session, job_id)
            trials = session.scalars(
                select(Trial).where(Trial.job_id == job_id).order_by(Trial.order, Trial.attempt)
            ).all()
            return [_trial_view(session, t) for t in trials]

    @app.get("/v1/trials/{trial_id}", response_model=TrialView, responses=NOT_FOUND)
    def get_trial(trial_id: str, c: Ctx) -> TrialView:
        with c.sessions() as session:
            return _trial_view(session, _get_trial(session, trial_id))

    @app.get("/v1/trials/{trial_id}/events", response_model=list[EventView], responses=NOT_FOUND)
    def trial_events(
        trial_id: str,
        c: Ctx,
        after: Annotated[int, Query(ge=0, description="only events with seq > after")] = 0,
        limit: Annotated[int, Query(ge=1, le=10_000)] = 1000,
    ) -> list[EventView]:
        with c.sessions() as session:
            _get_trial(session, trial_id)
            rows = session.scalars(
                select(EventRow)
                .where(EventRow.trial_id == trial_id, EventRow.seq > after)
                .order_by(EventRow.seq)
                .limit(limit)
            ).all()
            return [EventView(seq=r.seq, type=r.type, payload=r.payload) for r in rows]

    @app.get(
        "/v1/trials/{trial_id}/artifacts/{name}",
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
    def trial_artifact(trial_id: str, name: str, c: Ctx) -> Response:
        with c.sessions() as session:
            _get_trial(session, trial_id)
            artifact = session.scalar(
                select(Artifact).where(Artifact.trial_id == trial_id, Artifact.name == name)
            )
            if artifact is None:
                raise HTTPException(404, f"Trial {trial_id} has no artifact {name}.")
            media = (
                "application/x-ndjson" if name.endswith(".jsonl") else "application/octet-stream"
            )
            return Response(artifact.content, media_type=media, headers={"ETag": artifact.sha256})

    @app.get(
        "/v1/jobs/{job_id}/report",
        responses={
            200: {
                "model": Report,
                "content": {"text/plain": {"schema": {"type": "string"}}},
                "description": "The report as JSON, or laid out for a terminal with format=text",
            },
            **NOT_FOUND,
        },
    )
    def report(job_id: str, c: Ctx, format: Literal["json", "text"] = "json") -> Response:
        with c.sessions() as session:
            data = job_report(session, _get_job(session, job_id))
        if format == "text":
            return PlainTextResponse(render_text(data))
        return JSONResponse(data)
