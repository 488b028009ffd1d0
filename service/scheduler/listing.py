"""Listing a Python suite's cases: a short sandboxed run (the worker imports the suite inside
a container), cached by the suite's sha256 and the image, the way pi-evals discovers cases
inside its container.

For a request it takes a container slot from the scheduler like a trial: it counts against
the box's EXAMHALL_MAX_CONTAINERS and the submitting team's cap. The request waits for a slot
without holding a thread (the event loop polls), and the container runs on a pool of our own,
never on the server's request threads, so slow or hostile uploads cannot starve other
requests.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

from sandbox.protocol import (
    CaseInfo,
    CasesMessage,
    ListCasesRequest,
    SuiteBundle,
    WorkerMessage,
    encode,
)
from service.backends.base import LaunchSpec
from service.launch.launcher import Launcher
from service.launch.worker_channel import SandboxRun
from service.settings import get_settings
from service.suites import SuiteError, case_id_problem
from service.suites.python import suite_sha256

if TYPE_CHECKING:
    from service.scheduler.loop import Scheduler

# For callers that give none; the CLI and the control plane use EXAMHALL_LIST_TIMEOUT_S.
LIST_DEADLINE_S = 60.0
# Labels of listing containers: the reaper tells them from trials' by this prefix.
LIST_PREFIX = "list-"
SLOT_POLL_S = 0.1


def cache_dir() -> Path:
    base = get_settings().cache_dir or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "examhall"
    )
    return Path(base) / "cases"


def _cache_file(image: str, bundle: SuiteBundle) -> Path:
    # Keyed by suite and image: a new worker may discover cases differently.
    key = hashlib.sha256(f"{suite_sha256(bundle)}\n{image}".encode()).hexdigest()
    return cache_dir() / f"{key}.json"


def cached_cases(image: str, bundle: SuiteBundle) -> list[CaseInfo] | None:
    """The suite's cases when a listing of it on `image` was kept, without a sandbox."""
    cached = _cache_file(image, bundle)
    if not cached.is_file():
        return None
    return [CaseInfo(**item) for item in json.loads(cached.read_text())]


def _failure(run: SandboxRun, deadline_s: float) -> str:
    """Why a listing container gave no answer, in words an author of the suite can act on."""
    tail = run.stderr_tail.strip()[-1000:]
    if run.timed_out:
        return (
            f"the suite's import took longer than {deadline_s:g} s, so its container was "
            "stopped; make the module quick to import (no work at import time)"
        )
    if run.infra_error:
        return run.infra_error
    if run.oom_killed:
        return "the suite's import ran out of memory"
    reason = f"the listing container exited with code {run.exit_code} without an answer"
    if run.channel_error:
        reason += f" ({run.channel_error})"
    return f"{reason}: {tail}" if tail else f"{reason} and printed nothing"


def list_cases(
    launcher: Launcher,
    bundle: SuiteBundle,
    *,
    deadline_s: float = LIST_DEADLINE_S,
    team_id: str | None = None,
) -> list[CaseInfo]:
    """The suite's cases, from the cache or from a short sandboxed import of it (in a
    container of `team_id`'s, whose cap holds the listing's slot)."""
    image = launcher.backend.image
    cases = cached_cases(image, bundle)
    if cases is not None:
        return cases
    answers: list[CasesMessage] = []

    def on_message(message: WorkerMessage) -> None:
        if isinstance(message, CasesMessage):
            answers.append(message)

    run = launcher.run(
        LaunchSpec(
            trial_id=f"{LIST_PREFIX}{uuid.uuid4().hex[:12]}", job_id="list-cases", team_id=team_id
        ),
        encode(ListCasesRequest(suite=bundle)),
        deadline_s=deadline_s,
        on_message=on_message,
    )
    if not answers:
        raise SuiteError(
            f"Listing the cases of suite {bundle.name} failed: {_failure(run, deadline_s)}."
        )
    if answers[0].error:
        raise SuiteError(answers[0].error)
    cases = answers[0].cases
    for case in cases:
        if problem := case_id_problem(case.id):
            raise SuiteError(f"Suite {bundle.name}: {problem}")
    cached = _cache_file(image, bundle)
    cached.parent.mkdir(parents=True, exist_ok=True)
    tmp = cached.with_suffix(f".{uuid.uuid4().hex[:8]}.tmp")
    tmp.write_text(
        json.dumps(
            [
                {
                    "id": c.id,
                    "metadata": c.metadata,
                    "scripts": c.scripts,
                    "environment": c.environment,
                }
                for c in cases
            ]
        )
    )
    tmp.replace(cached)
    return cases


class ListingBusy(Exception):
    """No container slot came free in time; the message says which cap was full."""


class Lister:
    def __init__(self, scheduler: Scheduler, timeout_s: float) -> None:
        self.launcher = scheduler.launcher
        self.scheduler = scheduler
        self.timeout_s = timeout_s
        # Never more listings than the box has slots, so the pool never queues.
        self._pool = ThreadPoolExecutor(scheduler.max_containers, thread_name_prefix="list")

    async def cases(self, bundle: SuiteBundle, team_id: str | None) -> list[CaseInfo]:
        """The suite's cases: from the cache, or from a listing container. Raises SuiteError
        for a suite that cannot be listed and ListingBusy when no slot came free."""
        loop = asyncio.get_running_loop()
        cached = await loop.run_in_executor(None, cached_cases, self.launcher.backend.image, bundle)
        if cached is not None:
            return cached
        await self._reserve(team_id)
        try:
            future = self._pool.submit(
                list_cases, self.launcher, bundle, deadline_s=self.timeout_s, team_id=team_id
            )
            return await asyncio.wrap_future(future)
        finally:
            self.scheduler.release_listing(team_id)

    async def _reserve(self, team_id: str | None) -> None:
        loop = asyncio.get_running_loop()
        deadline = time.monotonic() + self.timeout_s
        self.scheduler.wait_for_listing(team_id, True)
        try:
            # The check reads the store for the team's cap: on the default executor, briefly.
            while not await loop.run_in_executor(None, self.scheduler.reserve_listing, team_id):
                if time.monotonic() > deadline:
                    raise ListingBusy(
                        f"Listing this suite's cases needs a container, and none came free "
                        f"in {self.timeout_s:g} s: the box's {self.scheduler.max_containers} "
                        "(or your team's cap of) containers are all running trials. Try again "
                        "later; a suite listed once is cached and needs no container."
                    )
                await asyncio.sleep(SLOT_POLL_S)
        finally:
            self.scheduler.wait_for_listing(team_id, False)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
