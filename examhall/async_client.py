"""The control plane's client for asyncio: examhall/client.py's methods, awaited. The
requests and the reading of their answers are examhall/calls.py's, shared with it."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Mapping
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


class AsyncClient(Connected[httpx.AsyncClient]):
    """As examhall.Client, each method a coroutine (follow an async iterator). Use it in an
    `async with` block, or await aclose()."""

    http_kind = httpx.AsyncClient

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self.http.aclose()

    async def _response(self, call: calls.Call[Any], *, stream: bool = False) -> httpx.Response:
        attempt = 0
        while True:
            attempt += 1
            try:
                response = await self.http.send(call.request(self.http), stream=stream)
            except httpx.TransportError as exc:
                if (wait := self.retry.after_error(attempt, exc, call.repeatable)) is None:
                    raise
            else:
                if (wait := self.retry.after_answer(attempt, response)) is None:
                    return response
                await response.aclose()
            await asyncio.sleep(wait)

    async def _send(self, call: calls.Call[T]) -> T:
        return call.parse(await self._response(call))

    async def upload(self, directory: str | os.PathLike[str], name: str | None = None) -> SuiteView:
        return await self._send(calls.upload(directory, name))

    async def push(self, directory: str | os.PathLike[str], name: str, version: str) -> SuiteView:
        return await self._send(calls.upload(directory, name, version))

    async def task_sets(self) -> list[TaskSetView]:
        return await self._send(calls.task_sets())

    async def submit(
        self, body: JobRequest | Mapping[str, Any] | None = None, **fields: Any
    ) -> JobCreated:
        return await self._send(calls.submit(body, fields))

    async def job(self, job_id: str) -> JobView:
        return await self._send(calls.job(job_id))

    async def jobs(self, limit: int = 100) -> list[JobView]:
        return await self._send(calls.jobs(limit))

    async def follow(self, job_id: str) -> AsyncIterator[StreamEvent]:
        call, lost = calls.stream(job_id), 0
        while True:
            response = await self._response(call, stream=True)
            reader = EventReader()
            try:
                if response.is_error:
                    await response.aread()
                    raise_for_error(response)
                async for line in response.aiter_lines():
                    if (event := reader.feed(line)) is not None:
                        lost = 0
                        yield event
                        if event.event == END:
                            return
                problem: httpx.TransportError = httpx.RemoteProtocolError(ENDED_EARLY)
            except httpx.TransportError as exc:
                problem = exc
            finally:
                await response.aclose()
            lost += 1
            if (wait := self.retry.after_error(lost, problem, repeatable=True)) is None:
                raise problem
            await asyncio.sleep(wait)

    async def wait(self, job_id: str) -> JobView:
        async for _event in self.follow(job_id):
            pass
        return await self.job(job_id)

    async def cancel(self, job_id: str) -> JobView:
        return await self._send(calls.cancel(job_id))

    async def report(self, job_id: str) -> Report:
        return await self._send(calls.report(job_id))

    async def report_text(self, job_id: str) -> str:
        return await self._send(calls.report_text(job_id))

    async def report_html(self, job_id: str) -> str:
        return await self._send(calls.report_html(job_id))

    async def trials(self, job_id: str) -> list[TrialView]:
        return await self._send(calls.trials(job_id))

    async def trial(self, trial_id: str) -> TrialView:
        return await self._send(calls.trial(trial_id))

    async def events(self, trial_id: str, *, after: int = 0, limit: int = 1000) -> list[EventView]:
        return await self._send(calls.events(trial_id, after, limit))

    async def artifact(self, trial_id: str, name: str) -> bytes:
        return await self._send(calls.artifact(trial_id, name))

    async def draw_sample(
        self, job_id: str, size: int, seed: int = 0, *, blind: bool = True, replace: bool = False
    ) -> SampleView:
        call = calls.draw_sample(job_id, size, seed, blind=blind, replace=replace)
        return await self._send(call)

    async def review_sample(self, job_id: str) -> SampleView:
        return await self._send(calls.review_sample(job_id))

    async def reviews(self, job_id: str, *, history: bool = False) -> list[ReviewView]:
        return await self._send(calls.reviews(job_id, history))

    async def review(
        self,
        job_id: str,
        trial_id: str,
        verdict: Literal["pass", "fail"],
        *,
        note: str = "",
        reviewer: str = "",
    ) -> ReviewView:
        return await self._send(calls.review(job_id, trial_id, verdict, note, reviewer))

    async def export(
        self, job_id: str, format: str = "inspect", *, path: str | os.PathLike[str]
    ) -> Path:
        return (await self._send(calls.export(job_id, format))).write(path, job_id)
