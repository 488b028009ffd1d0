"""Each task's environment build of one job, as its job's event stream tells it.

The preparer's build threads report here (a build began, a builder line, it ended); the
state is written to the job's row (`jobs.builds`) at most every WRITE_EVERY_S and when a
build ends, so that the stream of any control plane on the store reads it with the job
(service/api/stream.py) and the store takes one small write a second per building job,
whatever the builds print.
"""

from __future__ import annotations

import contextlib
import logging
import re
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from sqlalchemy import update
from sqlalchemy.orm import Session, sessionmaker

from service.domain.builds import STEP_CHARS, TaskBuild
from service.environments.builder import BUILDING
from service.store.models import Job

log = logging.getLogger(__name__)

WRITE_EVERY_S = 1.0
_STEP_LINE = re.compile(r"^Step \d+/\d+ : ")
# What the builder says before it layers examhall's worker on the task's image, whose own
# steps (service/environments/worker_layer.py) are not the task's.
_LAYERING = "Adding examhall's worker"
LAYER_STEP = "adding examhall's worker"


class BuildProgress:
    def __init__(
        self,
        sessions: sessionmaker[Session],
        job_id: str,
        cases: list[str],
        told: Mapping[str, Any] | None = None,
        agents: Sequence[str] = (),
    ) -> None:
        """`told`: the job's row as an earlier try at preparing it left it (a fault of ours
        ends a try, and the job is prepared again): a task it built stays built, with its
        seconds, when this try finds the image by its hash. `agents`: the names of the
        agents the job installs (`agent NAME`), told after the tasks' environments."""
        self.sessions = sessions
        self.job_id = job_id
        self._lock = threading.Lock()
        names = [*cases, *agents]
        self._tasks = {
            name: TaskBuild(index=i, of=len(names)) for i, name in enumerate(names, start=1)
        }
        for case, earlier in (told or {}).items():
            if case in self._tasks and isinstance(earlier, dict) and earlier["state"] == "built":
                self._tasks[case] = TaskBuild.model_validate(earlier)
        self._started: dict[str, float] = {}
        self._written_at = 0.0
        self._written: dict[str, dict[str, Any]] | None = None

    def line(self, case: str, text: str) -> None:
        """A line the builder printed for `case`'s environment."""
        with self._lock:
            task = self._tasks[case]
            if text.startswith(BUILDING):
                task.state = "building"
                self._started[case] = time.monotonic()
            elif text.startswith(_LAYERING):
                task.step = LAYER_STEP
            elif _STEP_LINE.match(text) and task.state == "building" and task.step != LAYER_STEP:
                task.step = text[:STEP_CHARS]
        self.write()

    def agent_line(self, name: str, text: str) -> None:
        """A line of an agent's install: the first begins it, each is its step."""
        with self._lock:
            task = self._tasks[name]
            if task.state == "waiting":
                task.state = "building"
                self._started[name] = time.monotonic()
            task.step = text[:STEP_CHARS]
        self.write()

    @contextlib.contextmanager
    def ticking(self) -> Iterator[None]:
        """Write the state every WRITE_EVERY_S meanwhile, so a step that prints nothing for
        minutes (an apt install, a wheel download) still shows its time going by."""
        done = threading.Event()

        def tick() -> None:
            while not done.wait(WRITE_EVERY_S):
                try:
                    self.write()
                except Exception:  # a store fault: the next tick, or the builds' end, writes
                    log.warning("job %s: build progress not written", self.job_id, exc_info=True)

        ticker = threading.Thread(target=tick, name=f"examhall-progress-{self.job_id}")
        ticker.daemon = True
        ticker.start()
        try:
            yield
        finally:
            done.set()
            ticker.join()

    def end(
        self,
        case: str,
        *,
        built: bool = False,
        failed: bool = False,
        failed_step: str | None = None,
    ) -> None:
        """`case`'s build ended: `built` (the builder ran its steps), else cached (it found
        the image by its hash), unless it `failed`."""
        with self._lock:
            task = self._tasks[case]
            # Found by its hash while still told built (by an earlier try): it stays so.
            if built or failed or task.state != "built":
                task.elapsed_s = self._elapsed(case)
                if failed:
                    task.state, task.failed_step = "failed", failed_step
                else:
                    task.state = "built" if built else "cached"
        self.write(force=True)

    def write(self, *, force: bool = False) -> None:
        """The state to the job's row, unless it was written less than WRITE_EVERY_S ago."""
        with self._lock:
            if not self._tasks:
                return  # nothing to build: the job's row says nothing of builds
            if not force and time.monotonic() - self._written_at < WRITE_EVERY_S:
                return
            self._written_at = time.monotonic()
            for case, task in self._tasks.items():
                if task.state == "building":
                    task.elapsed_s = self._elapsed(case)
            state = {case: task.model_dump() for case, task in self._tasks.items()}
            if state == self._written:
                return
            self._written = state
            # Under the lock: two threads' writes land in the order of their states.
            with self.sessions.begin() as session:
                session.execute(update(Job).where(Job.id == self.job_id).values(builds=state))

    def _elapsed(self, case: str) -> int:
        started = self._started.get(case)
        return 0 if started is None else round(time.monotonic() - started)
