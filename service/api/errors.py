"""The API's error bodies: 422 (where and what) for a request the schema or the planner
refuses, 503 (what is wrong, what to do) for one the store cannot serve now."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy.exc import DBAPIError

from service.api.context import Context
from service.domain.planner import JobInputError

# pydantic's names for "not an object" where a model was wanted.
_NOT_AN_OBJECT = frozenset({"model_type", "model_attributes_type", "dict_type"})
_MODEL_FIELDS = frozenset({"model", "judge_model"})


def message(error: Mapping[str, Any]) -> str:
    """A validation error's text as the caller should read it: without pydantic's "Value
    error, " before a message of ours, and with the model's shape for a model given as text."""
    text = str(error["msg"])
    loc = list(error.get("loc") or ())
    if error["type"] in _NOT_AN_OBJECT and loc and loc[-1] in _MODEL_FIELDS:
        return (
            'give the model as {"provider": "...", "id": "..."}, e.g. {"provider": '
            '"simulated", "id": "coin?p=0.85"}; the CLI and the Python client also take '
            '"PROVIDER/MODEL"'
        )
    return text.removeprefix("Value error, ")


def install(app: FastAPI) -> None:
    @app.exception_handler(RequestValidationError)
    async def validation_error(_request: Request, exc: RequestValidationError) -> JSONResponse:
        # Only where and what: echoing the input back could hold NaN, which JSON cannot carry.
        detail = [
            {"loc": list(e["loc"]), "msg": message(e), "type": e["type"]} for e in exc.errors()
        ]
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
