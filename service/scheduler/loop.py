"""The scheduler: runs queued trials in planned order, at most N sandboxes at once.

A trial's life: claimed from the queue (`store/queue.py`), launched with its run spec
(`run_spec.py`, `launch/trial.py`), its events taken in while it runs (`ingest.py`), its
end recorded (`store/results.py`), where an `infra_error` is retried as a new attempt up to
the job's `max_infra_retries`. Trials a control plane left running when it died are queued
again once it is known to be gone (`store/planes.py`), with their partial events dropped,
and their sandboxes are removed, so no trial is counted twice.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

import httpx
from sqlalchemy.orm import Session, sessionmaker

from sandbox.protocol import Event, SuiteBundle
from sandbox.providers.client import Budget
from service.backends.base import POOL_PREFIX, FoundSandbox, KeepsPool, SandboxBackend
from service.faults import Faults, engine_fault
from service.gateway import provider_trust
from service.launch.egress import trial_egress
from service.launch.launcher import Launcher
from service.launch.trial import Placement, TrialRecord, launch_trial
from service.owners import owner_gone
from service.providers import ProviderRegistry
from service.scheduler.ingest import EventSink
from service.scheduler.job_cache import JobCache
from service.scheduler.listing import LIST_PREFIX
from service.scheduler.outages import Outages
from service.scheduler.result_writer import ResultWriter
from service.scheduler.run_spec import run_spec
from service.settings import egress_policies, get_settings
from service.store import queue
from service.store.db import reading
from service.store.planes import BEAT_EVERY_S, beat, forget, live_planes, plane_owners
from service.store.results import Ended, record_infra_error
from service.suite_resolver import stored_tasks
from service.suites import SuiteFormat, format_of, task_spec, trial_deadline_s

log = logging.getLogger("examhall.scheduler")

REAP_EVERY_S = 30.0
# How often a plane asks the store whether a peer cancelled the job of a trial it runs. A
# cancel through this plane's own API stops its trials at once (`cancel`); the loop wakes at
# every trial's end, and a busy plane would otherwise ask at each.
CANCEL_POLL_S = 0.2
# The loop's pause while the store has a fault: each pass then tries a write (a heartbeat).
FAULT_POLL_S = 1.0


class Scheduler:
    def __init__(
        self,
        sessions: sessionmaker[Session],
        backend: SandboxBackend,
        providers: ProviderRegistry | None = None,
        *,
        max_containers: int | None = None,
        poll_s: float = 0.2,
    ) -> None:
        self.sessions = sessions
        self.backend = backend
        self.launcher = Launcher(backend)
        self.providers = providers or ProviderRegistry()
        # One client for every gateway: connection pools are shared across trials.
        self.http = httpx.Client(
            timeout=httpx.Timeout(120.0, connect=10.0), verify=provider_trust(get_settings())
        )
        self.max_containers = max_containers or get_settings().max_containers
        # Read once: a policy the operator wrote wrong stops the plane's start, not a trial.
        self.egress_policies = egress_policies()
        self.egress_max_bytes = get_settings().egress_max_bytes
        self.poll_s = poll_s
        self.owner = backend.owner
        self._stop = threading.Event()
        # What /healthz names: the store's and the engine's faults as this plane meets them.
        self.faults = Faults()
        self.outages = Outages(self.faults, self._stop)
        # The trials' ends, written together when they come together (result_writer.py).
        self.results = ResultWriter(sessions, self.owner, self.outages)
        self._wake = threading.Event()
        self._running: dict[str, str] = {}  # trial id -> job id
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(self.max_containers, thread_name_prefix="examhall-trial")
        self._thread: threading.Thread | None = None
        self._suites: dict[str, SuiteBundle] = {}
        self._jobs = JobCache(sessions)
        self._formats: dict[str, SuiteFormat] = {}
        self.on_change: Callable[[str], None] | None = None
        # Suite listings (service/scheduler/listing.py) run sandboxes too, so they hold slots
        # of the box's and their team's caps: the team of each listing running, and of each
        # waiting for a slot (served before queued trials, since a request is waiting).
        self._listings: list[str | None] = []
        self._listing_waits: list[str | None] = []
        # Claims and listing reservations take turns, so neither sees the other's count
        # half-updated and the caps hold between them.
        self._slots = threading.Lock()
        if isinstance(backend, KeepsPool):
            # The pool holds only the box's free slots, and for a capped team's trials only
            # what the team may still start: a container waiting in it counts against both
            # caps as one running, and a trial that takes it runs in its place.
            backend.limit_pool(self.free_slots, self.team_room)

    # ----- lifecycle --------------------------------------------------------------------

    def start(self) -> None:
        beat(self.sessions, self.owner)
        self.recover()
        self._thread = threading.Thread(target=self._loop, name="examhall-scheduler", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 30.0) -> None:
        """Stop promptly: kill the running trials' sandboxes and queue those trials again,
        so the next start runs them from scratch instead of waiting for them now."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)
        self.launcher.stop_all()
        self._pool.shutdown(wait=True, cancel_futures=True)
        self.results.close()
        if isinstance(self.backend, KeepsPool):
            self.backend.close_pool()
        self.http.close()
        forget(self.sessions, self.owner)

    def wake(self) -> None:
        self._wake.set()

    def recover(self) -> None:
        """Queue again the trials of control planes that are gone, and remove sandboxes no
        live plane runs. A live peer's trials and sandboxes are left alone."""
        with self.sessions() as session:
            live = live_planes(session) | {self.owner}
        stale = queue.requeue_orphaned(self.sessions, live)
        if stale:
            log.warning("queued %d interrupted trial(s) again", len(stale))
        with self._slots:  # no claim in flight: every trial claimed here is in _running
            with self._lock:
                mine = set(self._running)
            lost = queue.requeue_unrun(self.sessions, self.owner, mine)
        if lost:
            log.warning("queued %d trial(s) again whose claim's answer was lost", len(lost))
        self._reap(live - {self.owner})

    def _reap(self, others: set[str]) -> list[str]:
        """Remove sandboxes of this store's trials that no live control plane is running:
        ours that ended, and those of planes that are gone (not among the live `others`)."""
        with self.sessions() as session:
            planes = plane_owners(session)

        def orphaned(found: FoundSandbox) -> bool:
            if found.owner in others:
                return False
            if found.trial_id.startswith(POOL_PREFIX):
                # A warm container no trial took (a taken one goes by its trial's id): this
                # plane's pool keeps its own, so only a gone plane's is removed here.
                return found.owner != self.owner and (
                    owner_gone(found.owner) or found.owner in planes
                )
            if found.trial_id.startswith(LIST_PREFIX):
                # A listing has no row to ask the store about, and the engine may be shared
                # with another store's planes: remove it only when its plane is known to be
                # gone (its process exited on this host, or it is one of this store's planes
                # and no longer beats), or it is ours and no longer running.
                return found.owner == self.owner or owner_gone(found.owner) or found.owner in planes
            # Asked once per sandbox found, which are few, rather than reading every trial
            # id the store ever held on each pass.
            return queue.trial_known(self.sessions, found.trial_id)

        return self.launcher.reap(orphaned)

    # ----- the loop ---------------------------------------------------------------------

    def _loop(self) -> None:
        last_beat = last_reap = time.monotonic()
        last_cancel_poll = 0.0
        while not self._stop.is_set():
            pause = self.poll_s
            try:
                # While the store has a fault, the heartbeat is the write that finds it over.
                faulty = self.outages.current()
                if faulty or time.monotonic() - last_beat > BEAT_EVERY_S:
                    beat(self.sessions, self.owner)
                    last_beat = time.monotonic()
                    self.outages.passed()
                if time.monotonic() - last_cancel_poll >= CANCEL_POLL_S:
                    self._stop_cancelled()
                    last_cancel_poll = time.monotonic()
                if self._engine_down():  # the queued trials wait for it, retries unspent
                    pause = max(pause, FAULT_POLL_S)
                else:
                    self._fill()
                if time.monotonic() - last_reap > REAP_EVERY_S:
                    self.recover()  # a peer that died: its trials are ours to run again
                    last_reap = time.monotonic()
            except Exception as exc:  # the loop must outlive a database hiccup
                if self.outages.seen(exc) is None:
                    log.exception("scheduler iteration failed")
                else:  # named on /healthz and logged once; tried again at a slower pace
                    pause = max(pause, FAULT_POLL_S)
            self._wake.wait(pause)
            self._wake.clear()

    def _engine_down(self) -> bool:
        """Whether the engine, once a trial's run met it down (`_check_engine`), still is."""
        if "engine_unreachable" not in self.faults.current():
            return False
        health = self.backend.health()
        if health != "ok":
            self.faults.report("engine_unreachable", engine_fault(health))
            return True
        if self.faults.clear("engine_unreachable"):
            log.warning("The Docker engine answers again; queued trials are started.")
        return False

    def _check_engine(self) -> None:
        """After a trial's run failed for want of its sandbox: if the engine is down, it is
        named on /healthz and nothing more is claimed until it answers."""
        health = self.backend.health()
        if health != "ok" and self.faults.report("engine_unreachable", engine_fault(health)):
            log.warning("%s", engine_fault(health))

    def _fill(self) -> None:
        with self._slots:
            free = self.free_slots()
            if free <= 0:
                return
            claimed = self._claim(free)
            with self._lock:
                self._running.update((c.trial_id, c.job_id) for c in claimed)
        for trial in claimed:
            self._pool.submit(self._run_guarded, trial)

    def free_slots(self) -> int:
        """The box's container slots no trial or listing of this plane holds."""
        with self._lock:
            held = len(self._running) + len(self._listings) + len(self._listing_waits)
        return self.max_containers - held

    def team_room(self) -> dict[str, int]:
        """The containers each capped team may still start box-wide, as the claim counts
        them (every plane's running trials, and this plane's listings). Raises the store's
        errors."""
        with self._lock:
            local = self._listings + self._listing_waits
        with reading(self.sessions) as session:
            _, room = queue.room_by_team(session, local)
        return {team: left for team, left in room.items() if team is not None}

    def claim(self, limit: int) -> list[queue.Claimed]:
        """Claim up to `limit` queued trials for this plane, without running them."""
        return [queue.Claimed(c.trial_id, c.job_id) for c in self._claim(limit)]

    def _claim(self, limit: int) -> list[queue.ClaimedTrial]:
        with self._lock:
            local = self._listings + self._listing_waits
        return queue.claim(self.sessions, self.owner, limit, local)

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
        """Take a slot for a listing of `team_id`'s suite, within the box's cap and the
        team's (counted over every control plane's running trials); False when full."""
        with self._slots:
            with self._lock:
                if len(self._running) + len(self._listings) >= self.max_containers:
                    return False
                mine = self._listings.count(team_id)
            if team_id is not None:
                with self.sessions() as session:
                    cap = queue.team_cap(session, team_id)
                    if cap is not None:
                        running = queue.running_by_team(session).get(team_id, 0)
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

    # ----- cancels ----------------------------------------------------------------------

    def cancel(self, job_id: str) -> None:
        """Kill the sandboxes of a cancelled job's trials that this process runs now."""
        with self._lock:
            trial_ids = {t for t, j in self._running.items() if j == job_id}
        self.launcher.stop(trial_ids)

    def _stop_cancelled(self) -> None:
        """Kill our trials whose job was cancelled, maybe by another control plane."""
        with self._lock:
            running = list(self._running)
        if running and (doomed := queue.cancelled_among(self.sessions, running)):
            self.launcher.stop(set(doomed))

    # ----- one trial --------------------------------------------------------------------

    def _run_guarded(self, trial: queue.ClaimedTrial) -> None:
        trial_id = trial.trial_id
        try:
            self._run(trial)
        except Exception:
            log.exception("trial %s failed outside the sandbox", trial_id)
            self._check_engine()
            # Waiting out the store's faults: an unwritten end would leave the trial
            # running, owned by this live plane, until it restarts.
            self.outages.until_written(
                lambda: record_infra_error(
                    self.sessions,
                    self.owner,
                    trial_id,
                    "The control plane failed while running this trial.",
                )
            )
        finally:
            with self._lock:
                self._running.pop(trial_id, None)
            self._wake.set()

    def _run(self, trial: queue.ClaimedTrial) -> None:
        trial_id = trial.trial_id
        job = self._jobs.get(trial.job_id)
        spec = job.spec
        harness = spec.variant(trial.variant)
        deadline_s = harness.limits.timeout_s
        placement = task = agent_timeout_s = egress = None
        image = trial.image_digest or trial.image  # a case's environment by its id: a tag may move
        if image is not None and not self._format(job.suite_sha256).tasks:
            placement = Placement(image=image)
        elif image is not None:  # a task suite's trial, in its environment's image
            with self.sessions.begin() as session:
                found = stored_tasks(session, job.suite_sha256, job.suite_name).task(trial.case_id)
            agent_timeout_s = found.limits.agent_timeout_s or harness.limits.timeout_s
            deadline_s = trial_deadline_s(found, agent_timeout_s)
            egress = trial_egress(
                self.egress_policies,
                spec.egress,
                found.limits.wanted_network,
                found.limits.allowed_hosts,
                self.egress_max_bytes,
            )
            task = task_spec(
                found,
                agent=harness.agent if isinstance(harness.agent, str) else None,
                provider=harness.model.provider,
                workdir=None,
                egress=egress is not None,
                # A pip or catalogue agent, or any agent command: never the solution, whatever
                # model it is given.
                installed=harness.command is not None
                or (harness.agent is not None and not isinstance(harness.agent, str)),
            )
            placement = Placement(
                image=image,
                memory_bytes=found.limits.memory_bytes,
                cpus=found.limits.cpus,
                workspace_bytes=found.limits.storage_bytes,
            )
        launch = run_spec(
            trial_id=trial_id,
            suite=(
                SuiteBundle(job.suite_name, "")
                if task is not None
                else self._suite(job.suite_sha256, job.suite_name)
            ),
            case_id=trial.case_id,
            variant=trial.variant,
            harness=harness,
            round_=trial.round,
            seed=job.seed,
            docs=spec.docs,
            credentials=spec.credentials,
            providers=self.providers,
            task=task,
            agent_timeout_s=agent_timeout_s,
            judge_model=spec.judge_model,
        )
        judge_budget = Budget.from_limits(spec.judge_limits.model_dump())
        job_id, team_id = job.id, job.team_id
        sink = EventSink(self.sessions, trial_id, self.outages)
        record = launch_trial(
            self.launcher,
            launch,
            job_id=job_id,
            team_id=team_id,
            deadline_s=deadline_s,
            budget=Budget.from_limits(harness.budget()),
            providers=self.providers,
            http=self.http,
            on_event=sink,
            placement=placement,
            judge_budget=judge_budget,
            egress=egress,
        )
        if record.result.error_kind == "infra_error":
            self._check_engine()
        if self._stop.is_set():
            # Cut short by our own shutdown: not the trial's fault.
            queue.requeue_own(self.sessions, trial_id, self.owner)
            return
        self.record(trial_id, record, sink.rest())

    def record(
        self, trial_id: str, record: TrialRecord, events: Sequence[tuple[int, Event]] = ()
    ) -> None:
        """Store how a trial's run ended, with its last `events` (unless it is no longer
        ours to record), waiting out the store's faults: the run is not lost to a restarting
        server or a full disk. A write that failed left nothing behind (one transaction), so
        it is made again."""
        job_id = self.results.write(
            Ended(
                trial_id,
                record.result,
                artifacts=record.artifacts,
                sandbox_id=record.sandbox.sandbox_id if record.sandbox else None,
                node=record.sandbox.node if record.sandbox else None,
                wall_s=record.wall_s,
                cost_usd=record.cost_usd,
                judge_usage=record.judge_usage,
                events=events,
            )
        )
        if job_id is not None and self.on_change is not None:
            self.on_change(job_id)

    def _format(self, sha256: str) -> SuiteFormat:
        """The suite's format, by its row's kind (read once per suite)."""
        if sha256 not in self._formats:
            with self.sessions.begin() as session:
                self._formats[sha256] = format_of(queue.suite_kind(session, sha256))
        return self._formats[sha256]

    def _suite(self, sha256: str, name: str) -> SuiteBundle:
        """A Python suite's bundle as the job names it: the stored row's name is the first
        submitter's, perhaps another team's."""
        bundle = self._suites.get(sha256)
        if bundle is None:
            with self.sessions.begin() as session:
                _, source = queue.suite_source(session, sha256)
            bundle = self._suites[sha256] = SuiteBundle(name=name, source=source)
        return bundle if bundle.name == name else SuiteBundle(name=name, source=bundle.source)

    def idle(self) -> bool:
        with self._lock:
            return not self._running

    def running_count(self) -> int:
        with self._lock:
            return len(self._running)
