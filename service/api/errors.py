"""The API's 422 bodies: where and what, for a request the schema or the planner refuses."""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

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
