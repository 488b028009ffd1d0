"""Each request of the API as data, and how its answer is read: what the sync and the async
client share, so that they differ only in how they send (examhall/client.py,
examhall/async_client.py)."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, Generic, Literal, TypeVar, cast
from urllib.parse import quote

import httpx
from pydantic import BaseModel, TypeAdapter

from examhall.errors import ApiError, raise_for_error
from sandbox.protocol import ModelRef
from service.api.review_schemas import ReviewView, SampleView
from service.api.schemas import (
    EventView,
    JobCreated,
    JobView,
    SuiteView,
    TaskSetView,
    TrialView,
)
from service.domain.job_spec import JobRequest
from service.report.model import Report
from service.suites.archives import pack_directory

T = TypeVar("T")

# No read timeout on the stream: a long trial can keep it quiet between keepalives.
STREAM_TIMEOUT = httpx.Timeout(30.0, read=None)


@dataclass(frozen=True)
class Call(Generic[T]):
    """One request, and how its answer becomes the caller's result. `repeatable`: sending it
    twice does what sending it once does, so it may be sent again after a connection was
    lost mid-request (examhall/retry.py)."""

    method: str
    path: str
    parse: Callable[[httpx.Response], T]
    params: Mapping[str, Any] = field(default_factory=dict)
    json: Any = None
    content: bytes | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    repeatable: bool = True
    timeout: httpx.Timeout | None = None

    def request(self, http: httpx.Client | httpx.AsyncClient) -> httpx.Request:
        return http.build_request(
            self.method,
            self.path,
            params=dict(self.params),
            json=self.json,
            content=self.content,
            headers=dict(self.headers),
            timeout=self.timeout if self.timeout is not None else http.timeout,
        )


def _segment(value: str) -> str:
    # A path segment as sent: an id or artifact name with '/' or '?' must not change the route.
    return quote(value, safe="")


@cache
def _adapter(kind: Hashable) -> TypeAdapter[Any]:
    # Made once a kind: building a validator costs more than most answers take to read.
    return TypeAdapter(kind)


def model(kind: type[T]) -> Callable[[httpx.Response], T]:
    """An answer's JSON as the API's own model (or a list of them)."""
    adapter: TypeAdapter[T] = _adapter(cast(Hashable, kind))

    def parse(response: httpx.Response) -> T:
        raise_for_error(response)
        return adapter.validate_python(response.json())

    return parse


def text(response: httpx.Response) -> str:
    raise_for_error(response)
    return response.text


def page(response: httpx.Response) -> str:
    """A web page's HTML; the web UI sends a caller it does not know to its login page."""
    raise_for_error(response)
    if response.is_redirect:
        raise ApiError(
            f"{response.request.method} {response.request.url.path}",
            401,
            ["The token was refused; give the client a valid token (or $EXAMHALL_TOKEN)."],
        )
    return response.text


def content(response: httpx.Response) -> bytes:
    raise_for_error(response)
    return response.content


def suite_name(directory: str | os.PathLike[str]) -> str:
    """A directory's name as a suite's display name: characters the API does not take in a
    name (letters, digits, '_', '.', '-') become '-'."""
    base = Path(os.path.realpath(directory)).name
    return re.sub(r"[^A-Za-z0-9_.-]", "-", base)[:100] or "suite"


def upload(
    directory: str | os.PathLike[str], name: str | None = None, version: str | None = None
) -> Call[SuiteView]:
    """Pack the directory (service/suites/archives.py; an ArchiveError when it cannot be) for
    POST /v1/suites, pushed as `name@version` of a task set when a version is given.
    Repeatable: a suite is stored by its content's hash, and a version never changes."""
    params = {"name": name or suite_name(directory)}
    if version is not None:
        params["version"] = version
    return Call(
        "POST",
        "/v1/suites",
        model(SuiteView),
        params=params,
        content=pack_directory(directory),
        headers={"content-type": "application/gzip"},
    )


def task_sets() -> Call[list[TaskSetView]]:
    return Call("GET", "/v1/suite-sets", model(list[TaskSetView]))


def job_body(body: JobRequest | Mapping[str, Any] | None, fields: Mapping[str, Any]) -> Any:
    """POST /v1/jobs's body: `body` (a JobRequest or its JSON) with `fields` on top; a
    `model` given as "PROVIDER/MODEL" becomes {provider, id}. The server validates it."""
    if isinstance(body, BaseModel):
        sent: dict[str, Any] = body.model_dump(mode="json", exclude_unset=True)
    else:
        sent = dict(body or {})
    sent.update(fields)
    if isinstance(sent.get("model"), str):
        ref = ModelRef.parse(sent["model"])
        sent["model"] = {"provider": ref.provider, "id": ref.id}
    return sent


def submit(
    body: JobRequest | Mapping[str, Any] | None, fields: Mapping[str, Any]
) -> Call[JobCreated]:
    # Not repeatable: a submit whose answer was lost may have made the job already.
    return Call(
        "POST", "/v1/jobs", model(JobCreated), json=job_body(body, fields), repeatable=False
    )


def job(job_id: str) -> Call[JobView]:
    return Call("GET", f"/v1/jobs/{_segment(job_id)}", model(JobView))


def jobs(limit: int = 100) -> Call[list[JobView]]:
    return Call("GET", "/v1/jobs", model(list[JobView]), params={"limit": limit})


def cancel(job_id: str) -> Call[JobView]:
    # Repeatable: cancelling a cancelled job changes nothing (service/api/cancel.py).
    return Call("DELETE", f"/v1/jobs/{_segment(job_id)}", model(JobView))


def trials(job_id: str) -> Call[list[TrialView]]:
    return Call("GET", f"/v1/jobs/{_segment(job_id)}/trials", model(list[TrialView]))


def trial(trial_id: str) -> Call[TrialView]:
    return Call("GET", f"/v1/trials/{_segment(trial_id)}", model(TrialView))


def events(trial_id: str, after: int = 0, limit: int = 1000) -> Call[list[EventView]]:
    return Call(
        "GET",
        f"/v1/trials/{_segment(trial_id)}/events",
        model(list[EventView]),
        params={"after": after, "limit": limit},
    )


def artifact(trial_id: str, name: str) -> Call[bytes]:
    return Call("GET", f"/v1/trials/{_segment(trial_id)}/artifacts/{_segment(name)}", content)


def report(job_id: str) -> Call[Report]:
    return Call("GET", f"/v1/jobs/{_segment(job_id)}/report", model(Report))


def report_text(job_id: str) -> Call[str]:
    path = f"/v1/jobs/{_segment(job_id)}/report"
    return Call("GET", path, text, params={"format": "text"})


def report_html(job_id: str) -> Call[str]:
    # The web UI's job page is the report as HTML; it takes the API's bearer token.
    return Call("GET", f"/ui/jobs/{_segment(job_id)}", page)


@dataclass(frozen=True)
class Exported:
    """A job's export, and the file name the server gives it (Inspect's own naming, which
    `inspect view` lists; None if it gave none)."""

    data: bytes
    filename: str | None

    def write(self, path: str | os.PathLike[str], job_id: str) -> Path:
        """Write it to `path`, or, where `path` is a directory, there under its own name."""
        target = Path(path)
        if target.is_dir():
            target = target / (Path(self.filename).name if self.filename else f"{job_id}.json")
        target.write_bytes(self.data)
        return target


def exported(response: httpx.Response) -> Exported:
    raise_for_error(response)
    name = re.search(r'filename="([^"]+)"', response.headers.get("content-disposition", ""))
    return Exported(response.content, name.group(1) if name else None)


def export(job_id: str, format: str) -> Call[Exported]:
    path = f"/v1/jobs/{_segment(job_id)}/export"
    return Call("GET", path, exported, params={"format": format})


def draw_sample(
    job_id: str, size: int, seed: int, *, blind: bool = True, replace: bool = False
) -> Call[SampleView]:
    # Not repeatable: each draw is a new sample, and with `replace` it retires the last.
    path = f"/v1/jobs/{_segment(job_id)}/review-sample"
    body = {"size": size, "seed": seed, "blind": blind, "replace": replace}
    return Call("POST", path, model(SampleView), json=body, repeatable=False)


def review_sample(job_id: str) -> Call[SampleView]:
    return Call("GET", f"/v1/jobs/{_segment(job_id)}/review-sample", model(SampleView))


def reviews(job_id: str, history: bool = False) -> Call[list[ReviewView]]:
    path = f"/v1/jobs/{_segment(job_id)}/reviews"
    params = {"history": "true"} if history else {}
    return Call("GET", path, model(list[ReviewView]), params=params)


def review(
    job_id: str, trial_id: str, verdict: Literal["pass", "fail"], note: str, reviewer: str
) -> Call[ReviewView]:
    # Not repeatable: a second review of a trial is kept as a revision.
    body = {"trial_id": trial_id, "verdict": verdict, "note": note, "reviewer": reviewer}
    path = f"/v1/jobs/{_segment(job_id)}/reviews"
    return Call("POST", path, model(ReviewView), json=body, repeatable=False)


def stream(job_id: str) -> Call[httpx.Response]:
    """GET the job's server-sent events; the client reads the answer as it comes."""
    return Call("GET", f"/v1/jobs/{_segment(job_id)}/stream", _opened, timeout=STREAM_TIMEOUT)


def _opened(response: httpx.Response) -> httpx.Response:
    return response
