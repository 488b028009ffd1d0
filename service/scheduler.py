"""The scheduler: runs queued trials in planned order, at most N containers at once.

Each trial's events are ingested in batches while it runs; its result, artifacts and the
job's status are written when it ends. An `infra_error` is retried as a new attempt (every
attempt is kept) up to the job's `max_infra_retries`. Trials a control plane left `running`
when it died are queued again once it is known to be gone (service/planes.py), with their
partial events dropped, and their containers are removed, so no trial is counted twice.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any

import httpx
from sqlalchemy import delete, func, insert, or_, select, update
from sqlalchemy.orm import Session, sessionmaker

from sandbox.protocol import Event, Limits, ModelRef, RunSpec, SuiteBundle
from service import config
from service.backends.docker import LABEL_OWNER, LABEL_TRIAL, DockerBackend, owner_gone
from service.domain.job_spec import JobLimits, JobSpec, VariantSpec
from service.gateway import Budget, TrialGateway
from service.planes import BEAT_EVERY_S, beat, forget, live_planes
from service.providers import ProviderRegistry
from service.store.db import CLAIM_LOCK, take_turns
from service.store.models import Artifact, Job, Plane, Suite, Team, Trial, queued_trial
from service.store.models import Event as EventRow
from service.store.queries import dict_of
from service.suites import LIST_PREFIX
from service.trials import TrialRecord, run_trial

log = logging.getLogger("examhall.scheduler")

EVENT_BATCH = 200
EVENT_FLUSH_S = 0.25
REAP_EVERY_S = 30.0


def now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


def default_max_containers() -> int:
    return config.max_containers()


class EventSink:
    """Buffers a trial's events and writes them in batches.

    Rows are plain dicts written with one bulk INSERT per batch: ORM objects and the unit
    of work, and `dataclasses.asdict`'s deep copies, made up three quarters of the cost of
    ingesting an event (bench/ingestion.py).
    """

    def __init__(self, sessions: sessionmaker[Session], trial_id: str) -> None:
        self.sessions = sessions
        self.trial_id = trial_id
        self.pending: list[dict[str, Any]] = []
        self.seq = 0
        self.last_flush = time.monotonic()

    def __call__(self, event: Event) -> None:
        self.seq += 1
        self.pending.append(
            {
                "trial_id": self.trial_id,
                "seq": self.seq,
                "type": event.type,
                "payload": _plain(event),
            }
        )
        if len(self.pending) >= EVENT_BATCH or time.monotonic() - self.last_flush > EVENT_FLUSH_S:
            self.flush()

    def flush(self) -> None:
        if self.pending:
            with self.sessions.begin() as session:
                session.execute(insert(EventRow), self.pending)
            self.pending = []
        self.last_flush = time.monotonic()


_SCALARS = frozenset({str, int, float, bool, type(None)})


def _plain(value: Any) -> Any:
    """`dataclasses.asdict` without its deep copy of every leaf: the same dicts, lists and
    tuples, sharing the immutable scalars (events are frozen and only serialised)."""
    kind = type(value)
    if kind in _SCALARS:
        return value
    if kind is dict:
        return {key: _plain(item) for key, item in value.items()}
    if kind is list or kind is tuple:
        return kind(_plain(item) for item in value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    return copy.deepcopy(value)  # what asdict does with anything else


class Scheduler:
    def __init__(
        self,
        sessions: sessionmaker[Session],
        backend: DockerBackend,
        providers: ProviderRegistry | None = None,
        *,
        max_containers: int | None = None,
        poll_s: float = 0.2,
    ) -> None:
        self.sessions = sessions
        self.backend = backend
        self.providers = providers or ProviderRegistry()
        # One client for every gateway: connection pools are shared across trials.
        self.http = httpx.Client(timeout=httpx.Timeout(120.0, connect=10.0))
        self.max_containers = max_containers or default_max_containers()
        self.poll_s = poll_s
        self.owner = backend.settings.owner
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._running: dict[str, str] = {}  # trial id -> job id
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(self.max_containers, thread_name_prefix="examhall-trial")
        self._thread: threading.Thread | None = None
        self._suites: dict[str, SuiteBundle] = {}
        self.on_change: Callable[[str], None] | None = None
        # Suite listings (service/listing.py) run containers too, so they hold slots of the
        # box's and their team's caps: the team of each listing running, and of each
        # waiting for a slot (served before queued trials, since a request is waiting).
        self._listings: list[str | None] = []
        self._listing_waits: list[str | None] = []
        # Claims and listing reservations take turns, so neither sees the other's count
        # half-updated and the caps hold between them.
        self._slots = threading.Lock()

    # ----- lifecycle --------------------------------------------------------------------

    def start(self) -> None:
        beat(self.sessions, self.owner)
        self.recover()
        self._thread = threading.Thread(target=self._loop, name="examhall-scheduler", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 30.0) -> None:
        """Stop promptly: kill the running trials' containers and queue those trials
        again, so the next start runs them from scratch instead of waiting for them now."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)
        self.backend.stop_all()
        self._pool.shutdown(wait=True, cancel_futures=True)
        self.http.close()
        forget(self.sessions, self.owner)

    def wake(self) -> None:
        self._wake.set()

    def recover(self) -> None:
        """Queue again the trials of control planes that are gone, and remove containers
        no live plane runs. A live peer's trials and containers are left alone."""
        with self.sessions() as session:
            live = live_planes(session) | {self.owner}
        stale = self._requeue(or_(Trial.owner.is_(None), Trial.owner.not_in(live)))
        if stale:
            log.warning("queued %d interrupted trial(s) again", len(stale))
        self._reap(live - {self.owner})

    def _requeue(self, *which: Any) -> list[str]:
        """Queue the running trials matching `which` again, with their partial transcripts
        dropped so nothing counts twice; returns their ids. The update itself checks the
        trials are still running as `which` says, so a trial another plane claimed since
        the caller looked is never taken from it."""
        with self.sessions.begin() as session:
            requeued = list(
                session.scalars(
                    update(Trial)
                    .where(Trial.status == "running", *which)
                    .values(status="queued", owner=None, container_id=None, started_at=None)
                    .returning(Trial.id)
                ).all()
            )
            if requeued:
                drop_transcripts(session, requeued)
        return requeued

    def _reap(self, others: set[str]) -> list[str]:
        """Remove containers of this store's trials that no live control plane is running:
        ours that ended, and those of planes that are gone (not among the live `others`)."""
        with self.sessions() as session:
            planes = set(session.scalars(select(Plane.owner)).all())

        def only(container: Any) -> bool:
            owner = container.labels.get(LABEL_OWNER, "")
            if owner in others:
                return False
            if container.labels.get(LABEL_TRIAL, "").startswith(LIST_PREFIX):
                # A listing has no row to ask the store about, and the engine may be shared
                # with another store's planes: remove it only when its plane is known to be
                # gone (its process exited on this host, or it is one of this store's planes
                # and no longer beats), or it is ours and no longer running.
                return owner == self.owner or owner_gone(owner) or owner in planes
            return True

        return self.backend.reap(
            keep=lambda trial: not trial.startswith(LIST_PREFIX) and not self._known(trial),
            only=only,
        )

    def _known(self, trial_id: str) -> bool:
        """Whether the trial is in this store. Asked once per labelled container, which are
        few, rather than reading every trial id the store ever held on each pass."""
        with self.sessions() as session:
            return session.scalar(select(Trial.id).where(Trial.id == trial_id)) is not None

    # ----- the loop ---------------------------------------------------------------------

    def _loop(self) -> None:
        last_beat = last_reap = time.monotonic()
        while not self._stop.is_set():
            try:
                if time.monotonic() - last_beat > BEAT_EVERY_S:
                    beat(self.sessions, self.owner)
                    last_beat = time.monotonic()
                self._stop_cancelled()
                self._fill()
                if time.monotonic() - last_reap > REAP_EVERY_S:
                    self.recover()  # a peer that died: its trials are ours to run again
                    last_reap = time.monotonic()
            except Exception:  # the loop must outlive a database hiccup
                log.exception("scheduler iteration failed")
            self._wake.wait(self.poll_s)
            self._wake.clear()

    def _fill(self) -> None:
        with self._slots:
            with self._lock:
                held = len(self._running) + len(self._listings) + len(self._listing_waits)
            free = self.max_containers - held
            if free <= 0:
                return
            claimed = self._claim(free)
            with self._lock:
                self._running.update(claimed)
        for trial_id, _job_id in claimed:
            self._pool.submit(self._run_guarded, trial_id)

    # ----- listings' slots --------------------------------------------------------------

    def wait_for_listing(self, team_id: str | None, waiting: bool) -> None:
        """Mark (or unmark) a listing of `team_id` as waiting: trials are not claimed into
        the slot it is waiting for."""
        with self._lock:
            if waiting:
                self._listing_waits.append(team_id)
            else:
                self._listing_waits.remove(team_id)

    def reserve_listing(self, team_id: str | None) -> bool:
        """Take a container slot for a listing of `team_id`'s suite, within the box's cap and
        the team's (counted over every control plane's running trials); False when full."""
        with self._slots:
            with self._lock:
                if len(self._running) + len(self._listings) >= self.max_containers:
                    return False
                mine = self._listings.count(team_id)
            if team_id is not None:
                with self.sessions() as session:
                    cap = session.scalar(select(Team.max_containers).where(Team.id == team_id))
                    if cap is not None:
                        running = running_by_team(session).get(team_id, 0)
                        if running + mine >= cap:
                            return False
            with self._lock:
                self._listings.append(team_id)
            return True

    def release_listing(self, team_id: str | None) -> None:
        with self._lock:
            self._listings.remove(team_id)
        self._wake.set()

    def listings(self) -> int:
        with self._lock:
            return len(self._listings)

    def cancel(self, job_id: str) -> None:
        """Kill the containers of a cancelled job's trials that this process runs now."""
        with self._lock:
            trial_ids = {t for t, j in self._running.items() if j == job_id}
        self.backend.stop(trial_ids)

    def _stop_cancelled(self) -> None:
        """Kill our trials whose job was cancelled, maybe by another control plane."""
        with self._lock:
            running = list(self._running)
        if not running:
            return
        with self.sessions() as session:
            doomed = session.scalars(
                select(Trial.id)
                .join(Job, Job.id == Trial.job_id)
                .where(Trial.id.in_(running), Job.status == "cancelled")
            ).all()
        if doomed:
            self.backend.stop(set(doomed))

    def _claim(self, limit: int) -> list[tuple[str, str]]:
        """Mark the next queued trials running, in job then plan order, within each team's
        container cap. Returns (trial id, job id) pairs."""
        with self.sessions.begin() as session:
            # Control planes claim one at a time, so each counts the others' claims against
            # the team caps; a claim is a few short statements.
            take_turns(session.connection(), CLAIM_LOCK)
            postgres = session.bind is not None and session.bind.dialect.name == "postgresql"
            queue = (
                select(Trial, Job.created_at)
                .join(Job, Job.id == Trial.job_id)
                .where(Trial.status == "queued", Job.status != "cancelled")
                .order_by(Job.created_at, Trial.order, Trial.attempt)
            )
            if postgres:
                queue = queue.with_for_update(skip_locked=True, of=Trial)
            room = self._team_room(session)
            with self._lock:
                local = self._listings + self._listing_waits
            for team_id in local:
                if team_id in room:
                    room[team_id] -= 1
            # Capped teams are queried apart, each for no more than its room, so a capped
            # team's long queue can never crowd the others out of the window.
            uncapped = queue.where(or_(Job.team_id.is_(None), Job.team_id.not_in(room)))
            picks = list(session.execute(uncapped.limit(limit)).all())
            for team_id, free in room.items():
                if free > 0:
                    capped = queue.where(Job.team_id == team_id).limit(min(free, limit))
                    picks += session.execute(capped).all()
            picks.sort(key=lambda pick: (pick[1], pick[0].order, pick[0].attempt))
            trials = []
            for trial, _ in picks[:limit]:
                # SQLite's reads take no lock, so another process may have claimed this row
                # since we read it: only a write conditional on "queued" proves it is ours.
                claimed = session.connection().execute(
                    update(Trial)
                    .where(Trial.id == trial.id, Trial.status == "queued")
                    .values(status="running", owner=self.owner, started_at=now())
                )
                if claimed.rowcount != 1:
                    continue
                trials.append(trial)
                # Conditional too: a cancel committed meanwhile must not be overwritten.
                session.connection().execute(
                    update(Job)
                    .where(Job.id == trial.job_id, Job.status == "queued")
                    .values(status="running")
                )
            return [(t.id, t.job_id) for t in trials]

    @staticmethod
    def _team_room(session: Session) -> dict[str, int]:
        """Containers each capped team may still start, box-wide (all control planes)."""
        caps = dict_of(
            session, select(Team.id, Team.max_containers).where(Team.max_containers.is_not(None))
        )
        if not caps:
            return {}
        running = running_by_team(session)
        return {team: (cap or 0) - running.get(team, 0) for team, cap in caps.items()}

    def _run_guarded(self, trial_id: str) -> None:
        try:
            self._run(trial_id)
        except Exception:
            log.exception("trial %s failed outside the sandbox", trial_id)
            self._finish_infra(trial_id, "The control plane failed while running this trial.")
        finally:
            with self._lock:
                self._running.pop(trial_id, None)
            self._wake.set()

    def _spec(self, session: Session, trial: Trial, job: Job) -> RunSpec:
        bundle = self._suites.get(job.suite_sha256)
        if bundle is None:
            suite = session.get(Suite, job.suite_sha256)
            assert suite is not None
            bundle = SuiteBundle(name=suite.name, source=suite.source)
            self._suites[job.suite_sha256] = bundle
        job_spec = JobSpec.model_validate(job.spec)
        harness = job_spec.variant(trial.variant)
        return RunSpec(
            trial_id=trial.id,
            suite=bundle,
            case_id=trial.case_id,
            model=ModelRef(provider=harness.model.provider, id=harness.model.id),
            variant=trial.variant,
            round=trial.round,
            seed=job.seed,
            tools=tuple(harness.tools) if harness.tools is not None else None,
            limits=Limits(
                max_turns=harness.limits.max_turns, agent_timeout_s=harness.limits.timeout_s
            ),
            command=tuple(harness.command) if harness.command else None,
            docs=job_spec.docs if harness.docs else None,
            rules=harness.rules,
            **self._direct(job_spec, harness),
        )

    def _direct(self, job_spec: JobSpec, harness: VariantSpec) -> dict[str, Any]:
        """Direct credentials: the provider's wire settings and key go into the run spec."""
        entry = self.providers.get(harness.model.provider)
        if job_spec.credentials != "direct" or entry is None:
            return {}
        price = entry.prices.get(harness.model.id)
        return {
            "provider": {
                "kind": entry.kind,
                "base_url": entry.base_url,
                "headers": entry.headers,
                "max_tokens": entry.max_tokens,
                "price": dataclasses.asdict(price) if price else None,
            },
            "credentials": {"api_key": entry.key() or ""},
            "budget": harness.budget(),
        }

    def _run(self, trial_id: str) -> None:
        with self.sessions() as session:
            trial = session.get(Trial, trial_id)
            assert trial is not None
            job = session.get(Job, trial.job_id)
            assert job is not None
            spec = self._spec(session, trial, job)
            limits = JobSpec.model_validate(job.spec).variant(trial.variant).limits
        sink = EventSink(self.sessions, trial_id)
        gateway = self._gateway(spec, limits, sink)
        record = run_trial(
            self.backend,
            spec,
            job_id=job.id,
            deadline_s=limits.timeout_s,
            on_event=sink,
            on_model_call=gateway,
        )
        if gateway is not None:
            record.cost_usd = gateway.spent.cost_usd  # authoritative: kept by the gateway
        sink.flush()
        if self._stop.is_set():
            # Cut short by our own shutdown: not the trial's fault.
            self._requeue(Trial.id == trial_id, Trial.owner == self.owner)
            return
        self._store(trial_id, record)

    def _gateway(self, spec: RunSpec, limits: JobLimits, sink: EventSink) -> TrialGateway | None:
        entry = self.providers.get(spec.model.provider)
        if entry is None or spec.provider is not None:
            return None  # faux and simulated answer inside the sandbox; direct calls out
        return TrialGateway(
            entry,
            spec.model.id,
            budget=Budget.from_limits(limits.model_dump()),
            http=self.http,
            on_event=sink,
        )

    def _store(self, trial_id: str, record: TrialRecord) -> None:
        result = record.result
        with self.sessions.begin() as session:
            ending = self._ending(session, trial_id)
            if ending is None:
                return
            trial, job = ending
            trial.status = "finished"
            trial.outcome = result.outcome
            trial.score = result.score
            trial.error_kind = result.error_kind
            trial.error_message = result.error_message
            trial.failed_step = result.failed_step
            trial.model_requested = result.model_requested
            trial.model_returned = result.model_returned
            trial.tool_calls = result.tool_calls
            trial.usage = {**dataclasses.asdict(result.usage), "cost_usd": record.cost_usd}
            trial.judges = [dataclasses.asdict(j) for j in result.judges]
            trial.timings = result.timings
            trial.final_text = result.final_text
            trial.system_prompt_sha256 = result.system_prompt_sha256
            trial.limits_hit = result.limits_hit
            trial.container_id = record.container.container_id if record.container else None
            trial.finished_at = now()
            trial.wall_s = record.wall_s
            for name, content in record.artifacts.items():
                session.add(
                    Artifact(
                        trial_id=trial_id,
                        name=name,
                        sha256=hashlib.sha256(content).hexdigest(),
                        size=len(content),
                        content=content,
                    )
                )
            self._after(session, trial, job)
        if self.on_change is not None:
            self.on_change(trial.job_id)

    def _finish_infra(self, trial_id: str, message: str) -> None:
        with self.sessions.begin() as session:
            ending = self._ending(session, trial_id)
            if ending is None:
                return
            trial, job = ending
            trial.status = "finished"
            trial.outcome = "error"
            trial.error_kind = "infra_error"
            trial.error_message = message
            trial.finished_at = now()
            self._after(session, trial, job)

    def _ending(self, session: Session, trial_id: str) -> tuple[Trial, Job] | None:
        """The trial whose run ended, with its job's row locked until the transaction ends;
        None when its end is not ours to record.

        It is not when another plane took the trial over (we were presumed gone): that
        plane's run is the one that counts. Nor when its job was cancelled: the trial did not
        finish, and is dropped like the queued ones, so the job keeps exactly the trials that
        finished before the cancel. The lock makes trials finishing at once on PostgreSQL
        take turns: each counts the open trials after the other committed, so the last one
        always sees none left and finishes the job. (SQLite's writers take turns anyway.)
        """
        trial = session.get(Trial, trial_id)
        if trial is None or trial.status != "running" or trial.owner != self.owner:
            log.warning("dropping the result of %s: this control plane no longer runs it", trial)
            return None
        job = session.get(Job, trial.job_id, with_for_update=True, populate_existing=True)
        assert job is not None
        if job.status == "cancelled":
            drop_trials(session, [trial.id])
            return None
        return trial, job

    def _after(self, session: Session, trial: Trial, job: Job) -> None:
        """Retry an infra error as a new attempt; finish the job when nothing is left."""
        if trial.error_kind == "infra_error" and trial.attempt <= job.max_infra_retries:
            session.add(
                queued_trial(
                    job.id,
                    trial.case_id,
                    trial.variant,
                    trial.round,
                    trial.order,
                    trial.attempt + 1,
                )
            )
            return
        session.flush()
        open_trials = session.scalar(
            select(func.count())
            .select_from(Trial)
            .where(Trial.job_id == job.id, Trial.status != "finished")
        )
        if not open_trials:
            job.status = "finished"
            job.finished_at = now()

    def idle(self) -> bool:
        with self._lock:
            return not self._running

    def running_count(self) -> int:
        with self._lock:
            return len(self._running)


def running_by_team(session: Session) -> dict[str | None, int]:
    """Trials running now, per team (None for admin-submitted jobs), across control planes."""
    return dict_of(
        session,
        select(Job.team_id, func.count())
        .select_from(Trial)
        .join(Job, Job.id == Trial.job_id)
        .where(Trial.status == "running")
        .group_by(Job.team_id),
    )


def drop_trials(session: Session, trial_ids: list[str]) -> None:
    """Delete trials with their events and artifacts."""
    if trial_ids:
        drop_transcripts(session, trial_ids)
        session.execute(delete(Trial).where(Trial.id.in_(trial_ids)))


def drop_transcripts(session: Session, trial_ids: list[str]) -> None:
    """Delete what these trials' runs wrote: their events and artifacts."""
    session.execute(delete(EventRow).where(EventRow.trial_id.in_(trial_ids)))
    session.execute(delete(Artifact).where(Artifact.trial_id.in_(trial_ids)))
