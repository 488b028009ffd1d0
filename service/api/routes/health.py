"""/healthz for probes (no token) and /metrics for Prometheus (an admin token)."""

from __future__ import annotations

from collections import Counter
from typing import Literal

from fastapi import APIRouter
from fastapi.responses import JSONResponse, PlainTextResponse
from pydantic import BaseModel

from service.api import metrics
from service.api.access import NOT_FOUND
from service.api.auth import UNAUTHORIZED, Admin
from service.api.context import Context, Ctx
from service.backends.base import NodeStatus, SandboxError
from service.environments.cache import CacheState
from service.faults import FaultKind, engine_fault
from service.store.queries import ping

router = APIRouter()


class NodeCounts(BaseModel):
    """The machines trials run on (the engine on one box, each node of a swarm), by state:
    up or down, and no more (names and trials per node are on /metrics, for admins)."""

    ready: int = 0
    drained: int = 0
    down: int = 0


class ImageCacheView(BaseModel):
    """The built environments and agent layers on the box, as last measured."""

    images: int
    bytes: int
    limit_bytes: int | None


class Fault(BaseModel):
    """A fault the control plane is living through now: what it hits, and what to do."""

    kind: FaultKind
    message: str


class Health(BaseModel):
    status: Literal["ok", "unavailable"]
    database: str
    docker: str
    # Each fault while it lasts (status is then "unavailable"): the store down or its disk
    # full, as this probe or the plane's own writes met it, and the engine down.
    faults: list[Fault] = []
    # All zero when the backend cannot be asked, which `docker` then says.
    nodes: NodeCounts = NodeCounts()
    # None where this plane builds no environments (a backend that runs no task suites).
    image_cache: ImageCacheView | None = None


@router.get(
    "/metrics",
    response_class=PlainTextResponse,
    responses={**UNAUTHORIZED, **NOT_FOUND},
    summary="Prometheus metrics (admin token)",
)
def prometheus(c: Ctx, _admin: Admin) -> PlainTextResponse:
    with c.sessions() as session:
        body = metrics.render(session, c.scheduler.running_count(), _nodes(c), _image_cache(c))
    return PlainTextResponse(body, media_type="text/plain; version=0.0.4")


@router.get(
    "/healthz",
    responses={503: {"model": Health}},
    response_model=Health,
    summary="Database and Docker engine reachable (no token needed)",
)
def healthz(c: Ctx) -> JSONResponse:
    checks = {"database": _check_database(c), "docker": _check_docker(c)}
    faults = _faults(c, checks)
    healthy = all(v == "ok" for v in checks.values()) and not faults
    states = Counter(n.state for n in _nodes(c))
    nodes = NodeCounts(ready=states["ready"], drained=states["drained"], down=states["down"])
    cache = _image_cache(c)
    view = None
    if cache is not None:
        view = ImageCacheView(images=cache.images, bytes=cache.bytes, limit_bytes=cache.limit_bytes)
    health = Health(
        status="ok" if healthy else "unavailable",
        nodes=nodes,
        image_cache=view,
        faults=faults,
        **checks,
    )
    return JSONResponse(health.model_dump(), status_code=200 if healthy else 503)


def _image_cache(c: Context) -> CacheState | None:
    if c.preparer is None or c.preparer.cache is None:
        return None
    return c.preparer.cache.state


def _nodes(c: Context) -> list[NodeStatus]:
    try:
        return c.backend.nodes()
    except SandboxError:
        return []  # the backend's health check says what is wrong


def _faults(c: Context, checks: dict[str, str]) -> list[Fault]:
    found = c.scheduler.faults.current()
    if checks["docker"] != "ok":
        found["engine_unreachable"] = engine_fault(checks["docker"])
    return [Fault(kind=kind, message=message) for kind, message in sorted(found.items())]


def _check_database(c: Context) -> str:
    try:
        with c.sessions() as session:
            ping(session)
    except Exception as exc:  # any failure is the answer, not a crash of the probe
        c.scheduler.outages.seen(exc)  # named among the faults, until a write gets through
        return f"unreachable: {type(exc).__name__}"
    # Reachable: a fault of reaching it is over (a full disk is known over by a write).
    c.scheduler.outages.passed(("store_unreachable",))
    return "ok"


def _check_docker(c: Context) -> str:
    return c.backend.health()
