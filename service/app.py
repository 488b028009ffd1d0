"""The FastAPI control plane: jobs in, trials, events, artifacts and reports out.

This module composes the app: its context (store, backend, scheduler, lister) in the
lifespan, the routers of service/api/routes/, the error handlers and the body limit.
Every /v1 route needs a bearer token (service/api/auth.py); a team sees only its own jobs.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from fastapi import APIRouter, Depends, FastAPI

from service import __version__
from service.api import allow, errors
from service.api.auth import UNAUTHORIZED, principal
from service.api.body_limit import BodyCap, BodyLimit
from service.api.context import Context
from service.api.json_body import JsonDepthLimit
from service.api.routes import exports, health, jobs, reports, reviews, suites, trials
from service.backends.base import SandboxBackend
from service.backends.registry import create_backend
from service.providers import ProviderRegistry
from service.scheduler import Scheduler
from service.scheduler.listing import Lister
from service.scheduler.prepare import make_preparer
from service.settings import Settings, front_settings, get_settings
from service.settings import token as checked_token
from service.store.db import make_engine, migrate, session_factory
from service.web import api_docs, artifact_routes, review_routes
from service.web import routes as web_routes

ADMIN_TOKEN_ENV = "EXAMHALL_ADMIN_TOKEN"
# Store connections a plane keeps beside its trials': the scheduler's and preparer's loops,
# build lanes, listings and the API's requests, each holding one briefly.
PLANE_CONNECTIONS = 10


def _progress(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def create_app(
    database_url: str | None = None,
    *,
    max_containers: int | None = None,
    make_backend: Callable[[], SandboxBackend] | None = None,
    admin_token: str | None = None,
    settings: Settings | None = None,
) -> FastAPI:
    """The app; the database, image and scheduler come up in its lifespan.

    `admin_token` (else $EXAMHALL_ADMIN_TOKEN) is accepted as an admin bearer token, so a
    fresh box can be used, and its teams created over the CLI, before any token exists."""
    admin_token = (
        checked_token(admin_token, "admin_token")
        if admin_token
        else checked_token(get_settings().admin_token, ADMIN_TOKEN_ENV)
    )
    front = settings or front_settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        providers = ProviderRegistry.load()
        slots = max_containers or get_settings().max_containers
        # A connection for each trial thread, and some for the plane's loops and requests.
        engine = make_engine(database_url, connections=slots + PLANE_CONNECTIONS)
        migrate(engine)
        backend = (
            make_backend() if make_backend else create_backend(get_settings().backend, _progress)
        )
        sessions = session_factory(engine)
        scheduler = Scheduler(sessions, backend, providers, max_containers=max_containers)
        scheduler.start()
        preparer = make_preparer(sessions, backend, on_ready=scheduler.wake)
        if preparer is not None:
            preparer.start()
        lister = Lister(scheduler, front.list_timeout_s)
        app.state.ctx = Context(
            sessions,
            backend,
            scheduler,
            backend.image,
            backend.image_digest,
            providers,
            admin_token,
            front,
            lister,
            preparer,
        )
        try:
            yield
        finally:
            if preparer is not None:
                preparer.stop()
            lister.close()
            scheduler.stop()
            engine.dispose()

    app = FastAPI(
        title="examhall",
        version=__version__,
        description="A containerised sandbox eval service for LLM agents.",
        lifespan=lifespan,
        # FastAPI's /docs and /redoc load their scripts and styles from a CDN; the page
        # service/web/api_docs.py renders from the same schema loads nothing.
        docs_url=None,
        redoc_url=None,
    )
    errors.install(app)
    # Authentication runs before the body is read, so a caller without a token learns
    # nothing about the API beyond the 401.
    v1 = APIRouter(prefix="/v1", dependencies=[Depends(principal)], responses=UNAUTHORIZED)
    for resource in (jobs, trials, reports, exports, suites, reviews):
        v1.include_router(resource.router)
    app.include_router(v1)
    allow.install(app)
    app.include_router(health.router)
    for exc_class, handler in web_routes.EXCEPTION_HANDLERS.items():
        app.add_exception_handler(exc_class, handler)
    app.include_router(web_routes.router)
    app.include_router(review_routes.router)
    app.include_router(artifact_routes.router)
    app.include_router(api_docs.router)
    # An archive upload has a cap of its own; every other body has the general one.
    archive_cap = BodyCap(
        front.max_suite_archive_bytes,
        suites.ARCHIVE_SETTING,
        "Leave large generated files out of the suite.",
    )
    # Inside the body limit (the middleware added last is outermost): it buffers JSON bodies.
    app.add_middleware(JsonDepthLimit)
    app.add_middleware(BodyLimit, max_bytes=front.max_body_bytes, paths={"/v1/suites": archive_cap})
    return app
