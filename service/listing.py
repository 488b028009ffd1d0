"""Listing a suite's cases for a request, within the box's container caps.

A listing is a short sandboxed run (service/suites.py), so it takes a container slot from
the scheduler like a trial: it counts against the box's EXAMHALL_MAX_CONTAINERS and the
submitting team's cap. The request waits for a slot without holding a thread (the event loop
polls), and the container runs on a pool of our own, never on the server's request threads,
so slow or hostile uploads cannot starve other requests.
"""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor

from sandbox.protocol import CaseInfo, SuiteBundle
from service.scheduler import Scheduler
from service.suites import cached_cases, list_cases

SLOT_POLL_S = 0.1


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
            future = self._pool.submit(list_cases, self.launcher, bundle, deadline_s=self.timeout_s)
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
