"""The API's error bodies: 422 (where and what) for a request the schema or the planner
refuses, 503 (what is wrong, what to do) for one the store cannot serve now."""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy.exc import DBAPIError

from service.api.context import Context
from service.domain.planner import JobInputError


def install(app: FastAPI) -> None:
    @app.exception_handler(RequestValidationError)
    async def validation_error(_request: Request, exc: RequestValidationError) -> JSONResponse:
        # Only where and what: echoing the input back could hold NaN, which JSON cannot carry.
        detail = [{"loc": list(e["loc"]), "msg": e["msg"], "type": e["type"]} for e in exc.errors()]
        return JSONResponse(status_code=422, content={"detail": detail})

    @app.exception_handler(JobInputError)
    async def job_input_error(_request: Request, exc: JobInputError) -> JSONResponse:
        body = {"detail": [{"loc": list(exc.loc), "msg": exc.message, "type": "value_error"}]}
        return JSONResponse(status_code=422, content=body)

    @app.exception_handler(DBAPIError)
    async def store_error(request: Request, exc: DBAPIError) -> JSONResponse:
        context: Context = request.app.state.ctx
        fault = context.scheduler.outages.seen(exc)  # also named on /healthz
        if fault is None:
            raise exc  # a bug: the server's 500, with its traceback in the log
        # Retry-After: the plane resumes by itself once the store is back.
        return JSONResponse(
            status_code=503, content={"detail": fault.message}, headers={"Retry-After": "5"}
        )
