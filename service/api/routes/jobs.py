"""/v1/jobs: submit, list, read, cancel and follow jobs."""

from __future__ import annotations

import dataclasses
from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Query, Request
from fastapi.responses import StreamingResponse
from starlette.concurrency import run_in_threadpool

from sandbox.protocol import CaseInfo
from service.api.access import NOT_FOUND, get_job, newest_jobs
from service.api.auth import Caller, resolve
from service.api.cancel import cancel_job
from service.api.context import Context, Ctx
from service.api.schemas import ErrorBody, JobCreated, JobView
from service.api.stream import JobWatch, job_events
from service.api.views import job_view
from service.domain.job_spec import OFFLINE, JobRequest
from service.domain.planner import (
    JobInputError,
    check_agents,
    check_credentials,
    check_models,
    check_plan_size,
    check_variant_count,
    resolve_design,
    select_cases,
)
from service.domain.status import JobStatus
from service.environments import EnvironmentProblem
from service.scheduler.listing import ListingBusy
from service.settings import egress_policies
from service.store.jobs import StoredSuite, create_job
from service.store.teams import team_by_id
from service.suite_resolver import format_for, python_source, resolve_tasks
from service.suites import SuiteError, SuiteFormat
from service.suites.python import with_environments
from service.teams import egress_allowed

router = APIRouter()

# One event of the job stream (each `data` is a JSON object; see service/api/stream.py).
SSE_EVENT: dict[str, Any] = {
    "type": "object",
    "properties": {
        "event": {"type": "string", "enum": ["trial", "counts", "report", "end"]},
        "data": {"type": "string", "contentMediaType": "application/json"},
    },
    "required": ["event", "data"],
}


@router.post(
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
    # thread (service/scheduler/listing.py). The short steps around it run on the thread pool.
    check_variant_count(body, c.settings.max_variants)
    suite_format = await run_in_threadpool(
        format_for, c.sessions, body.suite, team_id=caller.team_id, admin=caller.admin
    )
    if suite_format.tasks:
        created = await run_in_threadpool(submit_task_job, body, suite_format, c, caller)
        if c.preparer is not None:
            c.preparer.wake()
        return created
    # A Python suite: its cases are listed by importing it in a sandbox.
    check_agents(body, suite_format)
    if body.egress != OFFLINE:
        raise JobInputError(
            ("body", "egress"),
            "An egress policy applies to a task suite's tasks that ask for a network; a "
            "Python suite's cases run offline. Leave egress out.",
        )
    await run_in_threadpool(check_concurrency, c, caller, body.concurrency)
    bundle = await run_in_threadpool(python_source, body)
    try:
        infos = await c.lister.cases(bundle, caller.team_id)
    except SuiteError as exc:
        raise JobInputError(("body", "suite"), str(exc)) from None
    except ListingBusy as exc:
        raise HTTPException(503, str(exc), headers={"Retry-After": "10"}) from None

    def plan_and_store() -> JobCreated:
        cases = select_cases(body, [info.id for info in infos], bundle.name)
        try:
            design = with_environments(resolve_design(body, cases), infos, bundle.name)
        except EnvironmentProblem as exc:
            raise JobInputError(("body", "suite"), str(exc)) from None
        check_credentials(body, design, suite_format)
        if design.builds and c.preparer is None:
            raise JobInputError(
                ("body", "suite"),
                f"The job needs images built (environments of suite {bundle.name}, or agents "
                f"to install), which this box's backend ({c.backend.name}) cannot do; that "
                "needs the docker backend.",
            )
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
    if created.status == JobStatus.BUILDING and c.preparer is not None:
        c.preparer.wake()
    return created


def check_egress(c: Context, caller: Caller, policy: str) -> None:
    """The job's egress policy is one of the box's, and one its team may use."""
    policies = egress_policies()
    if policy not in policies:
        raise JobInputError(
            ("body", "egress"),
            f"This box has no egress policy {policy!r}; it has {', '.join(sorted(policies))} "
            "(EXAMHALL_EGRESS_POLICIES).",
        )
    if caller.team_id is None:
        return
    with c.sessions() as session:
        why = egress_allowed(team_by_id(session, caller.team_id), policy)
    if why is not None:
        raise JobInputError(("body", "egress"), why)


def check_concurrency(c: Context, caller: Caller, concurrency: int | None) -> None:
    """A job's own concurrency within its team's container cap: a larger one would promise
    what the cap never allows."""
    if concurrency is None or caller.team_id is None:
        return
    with c.sessions() as session:
        team = team_by_id(session, caller.team_id)
        cap = team.max_containers if team is not None else None
    if cap is not None and concurrency > cap:
        raise JobInputError(
            ("body", "concurrency"),
            f"concurrency {concurrency} is more than your team's container cap ({cap}); "
            f"give at most {cap}, or leave it out to run as many as the cap allows.",
        )


def submit_task_job(
    body: JobRequest, suite_format: SuiteFormat, c: Context, caller: Caller
) -> JobCreated:
    """A task suite's job: its tasks are read from its stored files (task.toml and the rest:
    no sandbox needed), and the job waits in `building` while the preparer builds its
    environments."""
    assert isinstance(body.suite, str)
    if c.preparer is None:
        raise JobInputError(
            ("body", "suite"),
            f"This box's backend ({c.backend.name}) cannot build task environments; task "
            "suites need the docker backend.",
        )
    check_agents(body, suite_format)
    try:
        with c.sessions.begin() as session:
            suite = resolve_tasks(
                session, body.suite, suite_format, team_id=caller.team_id, admin=caller.admin
            )
    except SuiteError as exc:
        raise JobInputError(("body", "suite"), str(exc)) from None
    cases = select_cases(body, list(suite.tasks), suite.name, suite.refused)
    check_egress(c, caller, body.egress)
    check_concurrency(c, caller, body.concurrency)
    design = resolve_design(body, cases)
    wanted = {case: suite.task(case).limits.wanted_network for case in cases}
    design = dataclasses.replace(
        design, networks={case: want for case, want in wanted.items() if want is not None}
    )
    check_credentials(body, design, suite_format)
    check_plan_size(body, design, c.settings.max_planned_trials)
    infos = [
        CaseInfo(id=task.id, scripts=["solution"] if task.has_solution else [])
        for task in suite.tasks.values()
    ]
    check_models(body, design, infos, c.providers)
    with c.sessions.begin() as session:
        job = create_job(
            session,
            body,
            StoredSuite(suite.sha256, suite.name),
            design,
            image=c.image,
            image_digest=c.image_digest,
            team_id=caller.team_id,
        )
        return JobCreated(id=job.id, planned_trials=job.planned, status=job.status)


@router.get("/jobs", response_model=list[JobView], summary="List jobs, newest first")
def list_jobs(
    c: Ctx, caller: Caller, limit: Annotated[int, Query(ge=1, le=1000)] = 100
) -> list[JobView]:
    with c.sessions() as session:
        return [job_view(session, job) for job in newest_jobs(session, caller, limit)]


@router.get("/jobs/{job_id}", response_model=JobView, responses=NOT_FOUND)
def get_one_job(job_id: str, c: Ctx, caller: Caller) -> JobView:
    with c.sessions() as session:
        return job_view(session, get_job(session, caller, job_id))


@router.delete(
    "/jobs/{job_id}",
    response_model=JobView,
    responses={**NOT_FOUND, 409: {"model": ErrorBody}},
    summary="Cancel a job",
    description="Queued trials are dropped and running ones stopped (their containers "
    "removed, their partial transcripts dropped); finished trials are kept. The control plane "
    "that takes the request stops its own trials at once; another control plane on the same "
    "store stops its within a fifth of a second (it asks the store for cancels that often, "
    "`CANCEL_POLL_S` in `service/scheduler/loop.py`). Cancelling a cancelled job changes "
    "nothing; a finished job cannot be cancelled (409).",
)
def cancel(job_id: str, c: Ctx, caller: Caller) -> JobView:
    cancel_job(c, caller, job_id)
    with c.sessions() as session:
        return job_view(session, get_job(session, caller, job_id))


@router.get(
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
