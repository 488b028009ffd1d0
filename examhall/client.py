"""The control plane's client: each method one request of the HTTP API, its answer the
API's own model. Sent again on a 503 and on a lost connection as examhall/retry.py says."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, TypeVar

import httpx

from examhall import calls
from examhall.connection import Connected
from examhall.errors import raise_for_error
from examhall.stream import END, ENDED_EARLY, EventReader, StreamEvent
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

T = TypeVar("T")


class Client(Connected[httpx.Client]):
    """A client of one control plane. `server` defaults to $EXAMHALL_SERVER and `token` to
    $EXAMHALL_TOKEN. Errors: an ApiError carrying the status and the server's detail; after
    the retries, the last httpx.TransportError. Use it in a `with` block, or call close()."""

    http_kind = httpx.Client

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        self.http.close()

    def _response(self, call: calls.Call[Any], *, stream: bool = False) -> httpx.Response:
        attempt = 0
        while True:
            attempt += 1
            try:
                response = self.http.send(call.request(self.http), stream=stream)
            except httpx.TransportError as exc:
                if (wait := self.retry.after_error(attempt, exc, call.repeatable)) is None:
                    raise
            else:
                if (wait := self.retry.after_answer(attempt, response)) is None:
                    return response
                response.close()
            time.sleep(wait)

    def _send(self, call: calls.Call[T]) -> T:
        return call.parse(self._response(call))

    def upload(self, directory: str | os.PathLike[str], name: str | None = None) -> SuiteView:
        """Pack a suite's or a task's directory and upload it (POST /v1/suites): its id,
        `sha256:<hex>`, is what a job's `suite` names; an unchanged tree keeps its id. The
        answer also lists the tasks that loaded and those refused, each with why. An
        ArchiveError (service/suites/archives.py) when the tree cannot be packed."""
        return self._send(calls.upload(directory, name))

    def push(self, directory: str | os.PathLike[str], name: str, version: str) -> SuiteView:
        """Upload a directory of tasks as `name@version` of the caller's task set, which a
        job's `suite` then names (`name` alone: the newest version). A version never changes:
        an ApiError (409) when it was pushed with other contents."""
        return self._send(calls.upload(directory, name, version))

    def task_sets(self) -> list[TaskSetView]:
        """The task sets the token may read, each with its versions (oldest push first)."""
        return self._send(calls.task_sets())

    def submit(
        self, body: JobRequest | Mapping[str, Any] | None = None, **fields: Any
    ) -> JobCreated:
        """Submit a job (POST /v1/jobs): a job body, keyword arguments of one, or both (the
        keywords on top). `model` may be "PROVIDER/MODEL". Never sent twice on a lost
        connection, which could make two jobs."""
        return self._send(calls.submit(body, fields))

    def job(self, job_id: str) -> JobView:
        return self._send(calls.job(job_id))

    def jobs(self, limit: int = 100) -> list[JobView]:
        """The jobs the token sees, newest first."""
        return self._send(calls.jobs(limit))

    def follow(self, job_id: str) -> Iterator[StreamEvent]:
        """The job's stream of events until its `end`. A connection lost on the way is made
        again (the retry policy's count, started anew by each event); events already seen
        may then come again."""
        call, lost = calls.stream(job_id), 0
        while True:
            response = self._response(call, stream=True)
            reader = EventReader()
            try:
                if response.is_error:
                    response.read()
                    raise_for_error(response)
                for line in response.iter_lines():
                    if (event := reader.feed(line)) is not None:
                        lost = 0
                        yield event
                        if event.event == END:
                            return
                problem: httpx.TransportError = httpx.RemoteProtocolError(ENDED_EARLY)
            except httpx.TransportError as exc:
                problem = exc
            finally:
                response.close()
            lost += 1
            if (wait := self.retry.after_error(lost, problem, repeatable=True)) is None:
                raise problem
            time.sleep(wait)

    def wait(self, job_id: str) -> JobView:
        """Follow the job to its end, then answer it as it ended."""
        for _event in self.follow(job_id):
            pass
        return self.job(job_id)

    def cancel(self, job_id: str) -> JobView:
        """Cancel a job; its finished trials are kept. An ApiError (409) once it finished."""
        return self._send(calls.cancel(job_id))

    def report(self, job_id: str) -> Report:
        return self._send(calls.report(job_id))

    def report_text(self, job_id: str) -> str:
        """The report laid out for a terminal, as `examhall report` prints it."""
        return self._send(calls.report_text(job_id))

    def report_html(self, job_id: str) -> str:
        """The job's page of the web UI: its report, as HTML."""
        return self._send(calls.report_html(job_id))

    def trials(self, job_id: str) -> list[TrialView]:
        return self._send(calls.trials(job_id))

    def trial(self, trial_id: str) -> TrialView:
        return self._send(calls.trial(trial_id))

    def events(self, trial_id: str, *, after: int = 0, limit: int = 1000) -> list[EventView]:
        """A trial's events with `seq` above `after`, at most `limit` (up to 10,000)."""
        return self._send(calls.events(trial_id, after, limit))

    def artifact(self, trial_id: str, name: str) -> bytes:
        return self._send(calls.artifact(trial_id, name))

    def draw_sample(
        self, job_id: str, size: int, seed: int = 0, *, blind: bool = True, replace: bool = False
    ) -> SampleView:
        """Draw a review sample of a settled job (docs/guides/human-review.md); `replace`
        retires the job's sample of record, which a draw is refused without."""
        return self._send(calls.draw_sample(job_id, size, seed, blind=blind, replace=replace))

    def review_sample(self, job_id: str) -> SampleView:
        return self._send(calls.review_sample(job_id))

    def reviews(self, job_id: str, *, history: bool = False) -> list[ReviewView]:
        return self._send(calls.reviews(job_id, history))

    def review(
        self,
        job_id: str,
        trial_id: str,
        verdict: Literal["pass", "fail"],
        *,
        note: str = "",
        reviewer: str = "",
    ) -> ReviewView:
        return self._send(calls.review(job_id, trial_id, verdict, note, reviewer))

    def export(self, job_id: str, format: str = "inspect", *, path: str | os.PathLike[str]) -> Path:
        """Write the job's export (GET /v1/jobs/{id}/export) in `format` to `path` (a file,
        or a directory to write it in under the server's name for it); the path written."""
        return self._send(calls.export(job_id, format)).write(path, job_id)
