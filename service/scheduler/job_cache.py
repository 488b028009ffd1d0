"""What a plane's trials need of their job, read once per job rather than once per trial.

A job's spec, suite, seed and team are written when it is submitted and never change
(service/store/jobs.py), so a plane keeps them for the jobs whose trials it runs. Its status,
which does change, is not kept: cancels are read apart (`queue.cancelled_among`).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from sqlalchemy.orm import Session, sessionmaker

from service.domain.job_spec import JobSpec
from service.store import queue

# Jobs kept at most: a plane runs few at once, and a job read again costs one row.
KEPT = 64


@dataclass(frozen=True)
class JobToRun:
    id: str
    team_id: str | None
    suite_sha256: str
    suite_name: str
    seed: int
    spec: JobSpec


class JobCache:
    def __init__(self, sessions: sessionmaker[Session]) -> None:
        self.sessions = sessions
        self._jobs: dict[str, JobToRun] = {}
        self._lock = threading.Lock()

    def get(self, job_id: str) -> JobToRun:
        # Read under the lock: the trials of a new job start together, and one read serves
        # them all. A read is one row, once per job.
        with self._lock:
            kept = self._jobs.get(job_id)
            if kept is None:
                kept = self._read(job_id)
                if len(self._jobs) >= KEPT:
                    del self._jobs[next(iter(self._jobs))]  # the one read longest ago
                self._jobs[job_id] = kept
            return kept

    def _read(self, job_id: str) -> JobToRun:
        with self.sessions.begin() as session:
            job = queue.job_to_run(session, job_id)
            return JobToRun(
                job.id,
                job.team_id,
                job.suite_sha256,
                job.suite_name,
                job.seed,
                JobSpec.model_validate(job.spec),
            )
