"""Recording how a trial's run ended: its result and artifacts, a retry of an infra error,
and the job's end when nothing of it is left open.

Several trials' ends may be written in one transaction (`record_results`): a plane whose
trials end together writes them at once (service/scheduler/result_writer.py), so the job's counts
row, which every end locks, is locked once for them all rather than once each.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from sandbox.protocol import Event, TrialResult
from service.domain.status import JobStatus, Outcome, TrialStatus
from service.store import checkpoints, counts, tallies
from service.store.clock import now
from service.store.events import insert_in
from service.store.models import Artifact, Job, Trial, queued_trial
from service.store.queue import drop_trials

log = logging.getLogger("examhall.store")

# Outcomes that no one in the sandbox could cause (`launch.settle`, `launch.judging`).
RETRIED = frozenset({"infra_error", "judge_error"})


@dataclass(frozen=True)
class Ended:
    """How one trial's run ended, as the plane that ran it has it."""

    trial_id: str
    result: TrialResult
    artifacts: dict[str, bytes]
    sandbox_id: str | None
    wall_s: float
    cost_usd: float | None
    node: str | None = None
    judge_usage: dict[str, Any] | None = None
    # The run's last events, not yet written: written with the end, in its transaction,
    # when the end is ours to record (and dropped with it when it is not).
    events: Sequence[tuple[int, Event]] = ()


def record_result(
    sessions: sessionmaker[Session],
    owner: str,
    trial_id: str,
    result: TrialResult,
    *,
    artifacts: dict[str, bytes],
    sandbox_id: str | None,
    node: str | None = None,
    wall_s: float,
    cost_usd: float | None,
    judge_usage: dict[str, Any] | None = None,
) -> str | None:
    """Store the run's result; returns its job's id, or None when its end was not ours to
    record (see `_endings`)."""
    ended = Ended(trial_id, result, artifacts, sandbox_id, wall_s, cost_usd, node, judge_usage)
    return record_results(sessions, owner, [ended])[0]


def record_results(
    sessions: sessionmaker[Session], owner: str, ended: Sequence[Ended]
) -> list[str | None]:
    """Store several runs' results in one transaction: all of them or, on an error, none.
    Each one's job id, in order, or None where its end was not ours to record."""
    with sessions.begin() as session:
        endings = _endings(session, owner, [e.trial_id for e in ended])
        job_ids: list[str | None] = []
        changes = _Changes()
        insert_in(session, [(e.trial_id, e.events) for e in ended if e.trial_id in endings])
        for one in ended:
            ending = endings.get(one.trial_id)
            if ending is None:
                job_ids.append(None)
                continue
            _record(session, one, *ending)
            changes.add(session, *ending)
            job_ids.append(ending[1].id)
        changes.write(session)
        engine = session.get_bind().engine
    if any(job_ids):
        checkpoints.committed(engine)  # on the disk soon, like the trials' events before
    return job_ids


def _record(session: Session, ended: Ended, trial: Trial, job: Job) -> None:
    result, cost_usd, judge_usage = ended.result, ended.cost_usd, ended.judge_usage
    trial.status = TrialStatus.FINISHED
    trial.outcome = result.outcome
    trial.score = result.score
    trial.error_kind = result.error_kind
    trial.error_message = result.error_message
    trial.failed_step = result.failed_step
    trial.model_requested = result.model_requested
    trial.model_returned = result.model_returned
    trial.tool_calls = result.tool_calls
    trial.usage = {**dataclasses.asdict(result.usage), "cost_usd": cost_usd}
    if judge_usage is not None:
        trial.usage["judge"] = judge_usage  # the judge model's, apart from the agent's
    trial.judges = [dataclasses.asdict(j) for j in result.judges]
    trial.timings = result.timings
    # What a comparison's report reads of the JSON above, as columns it reads by index.
    trial.input_tokens = _count(result.usage.input_tokens)
    trial.output_tokens = _count(result.usage.output_tokens)
    trial.latency_s = _number(result.timings.get("run_agent"))
    trial.cost_usd = _number(cost_usd)
    trial.final_text = result.final_text
    trial.system_prompt_sha256 = result.system_prompt_sha256
    trial.limits_hit = result.limits_hit
    trial.container_id = ended.sandbox_id
    trial.node = ended.node
    trial.finished_at = now()
    trial.wall_s = ended.wall_s
    for name, content in ended.artifacts.items():
        session.add(
            Artifact(
                trial_id=trial.id,
                name=name,
                sha256=hashlib.sha256(content).hexdigest(),
                size=len(content),
                content=content,
            )
        )


def _count(value: Any) -> int | None:
    """A token count as a BIGINT column can hold it, else None (not a measurement)."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**63:
        return None
    return value


def _number(value: Any) -> float | None:
    """A number as a float column holds it, else None: the JSON column writes a NaN or an
    infinity as null too."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def record_infra_error(
    sessions: sessionmaker[Session], owner: str, trial_id: str, message: str
) -> None:
    """The control plane itself failed while running the trial: an infra error, retried."""
    with sessions.begin() as session:
        ending = _endings(session, owner, [trial_id]).get(trial_id)
        if ending is None:
            return
        trial, job = ending
        trial.status = TrialStatus.FINISHED
        trial.outcome = Outcome.ERROR
        trial.error_kind = "infra_error"
        trial.error_message = message
        trial.finished_at = now()
        changes = _Changes()
        changes.add(session, trial, job)
        changes.write(session)


def _endings(
    session: Session, owner: str, trial_ids: Sequence[str]
) -> dict[str, tuple[Trial, Job]]:
    """The trials whose runs ended, each with its job, whose counts and rows are locked
    until the transaction ends; a trial whose end is not ours to record is left out.

    It is not when another plane took the trial over (we were presumed gone): that plane's
    run is the one that counts. Nor when its job was cancelled: the trial did not finish,
    and is dropped like the queued ones, so the job keeps exactly the trials that finished
    before the cancel. The locks make trials finishing at once on PostgreSQL take turns: each
    reads the job's counts after the other committed, so the last one always sees none left
    and finishes the job. (SQLite's writers take turns anyway.)
    """
    trials: list[Trial] = []
    for trial_id in trial_ids:
        trial = session.get(Trial, trial_id)
        if trial is None or trial.status != TrialStatus.RUNNING or trial.owner != owner:
            log.warning("dropping the result of %s: this control plane no longer runs it", trial)
            continue
        trials.append(trial)
    # The jobs' counts rows before their rows, each in id order: as every writer locks.
    versions = counts.lock(session, (trial.job_id for trial in trials))
    jobs: dict[str, Job] = {}
    for job_id in sorted(versions):
        job = session.get(Job, job_id, with_for_update=True, populate_existing=True)
        assert job is not None
        jobs[job_id] = job
    endings: dict[str, tuple[Trial, Job]] = {}
    for trial in trials:
        job = jobs[trial.job_id]
        if job.status == JobStatus.CANCELLED:
            drop_trials(session, [trial.id])
            continue
        trial.changed = versions[trial.job_id]
        endings[trial.id] = (trial, job)
    return endings


@dataclass
class _Changes:
    """What the ends recorded in one transaction change of their jobs' counts and tallies,
    summed per job and written once each (`write`): one UPDATE of a job's counts row for
    all its trials that ended together."""

    jobs: dict[str, Job] = field(default_factory=dict)
    deltas: dict[str, Counter[str]] = field(default_factory=dict)
    # job -> tally key -> (passed, count), as `tallies.add` takes them
    tallies: dict[str, dict[tuple[str, str, str], tuple[int, int]]] = field(default_factory=dict)

    def add(self, session: Session, trial: Trial, job: Job) -> None:
        """A trial's end: retry an infra error, or a judge model's failure, as a new attempt
        (both within the job's max_infra_retries); else count its outcome."""
        self.jobs[job.id] = job
        summed = self.tallies.setdefault(job.id, {})
        for key, (passed, count) in tallies.of_trial(trial).items():
            before_passed, before_count = summed.get(key, (0, 0))
            summed[key] = (before_passed + passed, before_count + count)
        retried = trial.error_kind in RETRIED and trial.attempt <= job.max_infra_retries
        if retried:
            # The planned trial's latest attempt is the new, queued one.
            deltas = {"running": -1, "queued": 1, "attempts": 1}
            session.add(
                queued_trial(
                    job.id,
                    trial.case_id,
                    trial.variant,
                    trial.round,
                    trial.order,
                    trial.attempt + 1,
                    image=trial.image,
                    image_digest=trial.image_digest,
                )
            )
        else:
            deltas = {"running": -1, **counts.contribution(TrialStatus.FINISHED, trial.outcome)}
        self.deltas.setdefault(job.id, Counter()).update(deltas)

    def write(self, session: Session) -> None:
        """Each job's summed changes; finish a job when nothing of it is left open."""
        for job_id in sorted(self.jobs):
            job = self.jobs[job_id]
            tallies.add(session, job_id, self.tallies[job_id])
            # The job's counts, locked since `_endings`, say whether anything is left open:
            # every trial that ended before these has committed its change, none can start.
            kept = counts.add_and_read(session, job_id, self.deltas[job_id])
            assert kept is not None
            if kept.settled:
                job.status = JobStatus.FINISHED
                job.finished_at = now()
