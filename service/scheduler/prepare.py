"""Building a task suite's environments before its job runs, off the request path.

A job of a task suite is stored `building`, with no trials. The preparer builds (or finds,
by content hash) the environment of every task the job runs, then plans the trials, each
naming its task's image, and queues the job. A task whose environment does not build has its
trials ended with the build's error (`build_error`: naming the task and the failing step,
unscored, never retried) while the job's other tasks run; a job none of whose environments
builds, or whose agent does not install, ends with the error and starts no trial.

Jobs are prepared in lanes, one per team: a team's jobs in submission order, the teams side
by side, so that one team's slow or stuck build never holds another team's job, and a job
whose environments are all built already is queued at once. Builds keep the box's own
concurrency cap, timeout and resource caps (service/environments); a lane only orders its
team's jobs, and one job's tasks are built side by side within that cap, each telling its
progress on the job's row (build_progress.py). A job that is cancelled while it is prepared
has its builds stopped.
"""

from __future__ import annotations

import functools
import logging
import re
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait

from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from service.backends.base import BuildsImages, SandboxBackend
from service.domain.agents import AgentEnvironment
from service.domain.job_spec import JobSpec
from service.domain.status import JobStatus
from service.environments import (
    BuiltEnvironment,
    EnvironmentBuilder,
    EnvironmentBuildError,
    EnvironmentProblem,
    EnvironmentSource,
    dockerfile_source,
    ensure_agent_layer,
)
from service.environments.build_slots import NO_LANE, Lane
from service.environments.cache import ImageCache
from service.owners import owner_gone
from service.scheduler.build_progress import WRITE_EVERY_S, BuildProgress
from service.store import environments as builds
from service.store.failures import store_fault
from service.store.jobs import Unbuilt, building_jobs, fail_job, start_built_job
from service.store.models import Job, Team
from service.store.planes import live_planes, plane_owners
from service.suite_resolver import stored
from service.suites import SuiteError

log = logging.getLogger("examhall.prepare")

_STEP = re.compile(r"Step \d+/\d+")

POLL_S = 2.0
# How often the image cache is measured and kept under its limit, besides after each job.
COLLECT_S = 300.0
# A job's builds that wait at the box's build slots at once (a thread each).
MAX_WAITING_BUILDS = 16
# Faults of ours in preparing one job (the store, the engine) before it is ended with them.
MAX_FAULTS = 3


class EnvironmentPreparer:
    def __init__(
        self,
        sessions: sessionmaker[Session],
        builder: EnvironmentBuilder,
        *,
        on_ready: Callable[[], None],
        poll_s: float = POLL_S,
        cache: ImageCache | None = None,
    ) -> None:
        self.sessions = sessions
        self.builder = builder
        self.on_ready = on_ready
        self.poll_s = poll_s
        self.cache = cache
        self._collect_due = 0.0  # monotonic time of the next pass; 0: at once
        self._wake = threading.Event()
        self._faults: dict[str, int] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        # team (None: admin) -> its lane's thread; a lane ends when its team has no job left
        self._lanes: dict[str | None, threading.Thread] = {}
        # job being prepared -> the event that stops its builds
        self._cancels: dict[str, threading.Event] = {}
        # job being prepared -> the images it has found or built so far, which the cache
        # keeps until the job's trials name them
        self._holding: dict[str, set[str]] = {}

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="examhall-prepare", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        with self._lock:
            for cancel in self._cancels.values():
                cancel.set()
            lanes = list(self._lanes.values())
        if self._thread is not None:
            self._thread.join(timeout=5)
        for lane in lanes:
            lane.join(timeout=5)

    def wake(self) -> None:
        self._wake.set()

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                with self.sessions() as session:
                    waiting = building_jobs(session)
                self._dispatch(waiting)
            except Exception as exc:
                # A fault of the store is named on /healthz (the scheduler meets it too), not
                # logged at every poll while it lasts.
                if store_fault(exc) is None:
                    log.exception("finding jobs to prepare failed; trying again")
            if self.cache is not None and time.monotonic() >= self._collect_due:
                self._collect(self.cache)
            self._wake.wait(self.poll_s)
            self._wake.clear()

    def _dispatch(self, waiting: list[tuple[str, str | None]]) -> None:
        """Stop the builds of jobs no longer waiting (cancelled), and give each team with a
        waiting job a lane if it has none."""
        building = {job_id for job_id, _ in waiting}
        with self._lock:
            for job_id, cancel in self._cancels.items():
                if job_id not in building:
                    cancel.set()
            for team in dict.fromkeys(team for _, team in waiting):
                lane = self._lanes.get(team)
                if lane is not None and lane.is_alive():
                    continue
                lane = threading.Thread(
                    target=self._lane, args=(team,), name=f"examhall-prepare-{team}", daemon=True
                )
                self._lanes[team] = lane
                lane.start()

    def _reap(self) -> None:
        """Remove the build containers (capped runs, agent installs) of planes that are gone:
        dead on this host, or this store's planes that no longer beat."""
        with self.sessions() as session:
            live, known = live_planes(session), plane_owners(session)

        def gone(owner: str) -> bool:
            if owner == self.builder.owner or owner in live:
                return False
            return owner_gone(owner) or owner in known

        for removed in self.builder.engine.reap_capped(gone):
            log.warning("removed build container %s, left by a control plane that is gone", removed)

    def _collect(self, cache: ImageCache) -> None:
        self._collect_due = time.monotonic() + COLLECT_S
        try:
            self._reap()
        except Exception:
            log.exception("reaping the build containers of gone planes failed")
        try:
            with self.sessions() as session:
                last_used, active = builds.image_uses(session)
            with self._lock:
                holding = set().union(*self._holding.values())
            cache.collect(last_used, active | holding)
        except Exception:
            log.exception("keeping the image cache under its limit failed; trying again later")

    def _lane(self, team: str | None) -> None:
        """The team's waiting jobs, oldest first, until it has none."""
        while not self._stop.is_set():
            with self.sessions() as session:
                mine = [job_id for job_id, owner in building_jobs(session) if owner == team]
            if not mine:
                return
            for job_id in mine:
                if self._stop.is_set():
                    return
                self._prepare_guarded(job_id)
            if any(job_id in self._faults for job_id in mine):
                self._stop.wait(self.poll_s)  # a fault of ours: not again at once

    def _prepare_guarded(self, job_id: str) -> None:
        """One job; a fault of ours (not a failed build) is retried a few times, then ends
        that job, so no job can stop the others from being prepared."""
        cancel = threading.Event()
        with self._lock:
            self._cancels[job_id] = cancel
            self._holding[job_id] = set()
        try:
            self.prepare(job_id, cancel)
        except Exception as exc:
            log.exception("preparing job %s failed", job_id)
            self._faults[job_id] = self._faults.get(job_id, 0) + 1
            if self._faults[job_id] >= MAX_FAULTS:
                self._fail(job_id, f"Preparing the job failed {MAX_FAULTS} times: {exc}")
        finally:
            with self._lock:
                self._cancels.pop(job_id, None)
                self._holding.pop(job_id, None)
            self._collect_due = 0.0  # the job may have added images: measure again
            self._wake.set()

    def _building(self, job_id: str) -> bool:
        with self.sessions() as session:
            job = session.get(Job, job_id)
            return job is not None and job.status == JobStatus.BUILDING

    def prepare(self, job_id: str, cancel: threading.Event | None = None) -> bool:
        """Build what `job_id` needs and queue it; False when it did not start. Setting
        `cancel` stops its builds."""
        with self.sessions() as session:
            job = session.get(Job, job_id)
            if job is None:
                return False
            spec = JobSpec.model_validate(job.spec)
            if spec.credentials == "direct":
                # Refused at submission (planner.check_credentials): a key must never reach
                # an image a suite built, whatever wrote this row.
                return self._fail(job_id, "Direct credentials cannot run in a built image.")
            # What an earlier try at this job (one a fault of ours ended) already told.
            told = dict(job.builds or {})
            team = session.get(Team, job.team_id) if job.team_id is not None else None
            lane = Lane(job.team_id, (team.share or 1) if team is not None else 1)
            try:
                sources = self._sources(session, job, spec)
            except (SuiteError, EnvironmentProblem) as exc:
                return self._fail(job_id, f"Suite {job.suite_name} cannot run: {exc}")
        agents = {
            name: AgentEnvironment.model_validate(variant.agent)
            for name, variant in spec.variants.items()
            if isinstance(variant.agent, dict)
        }
        stop = cancel if cancel is not None else threading.Event()
        installing = [variant for variant in spec.arms if variant in agents]
        progress = BuildProgress(
            self.sessions,
            job_id,
            [case for case in spec.cases if case in sources],
            told,
            agents=[f"agent {variant}" for variant in installing],
        )
        with progress.ticking():
            built = self._build_all(job_id, spec.cases, sources, stop, progress, lane)
            if built is None:
                return False  # cancelled meanwhile, or planned by another plane
            unbuilt = {case: why for case, why in built.items() if isinstance(why, Unbuilt)}
            try:
                images = self._images(job_id, spec, built, agents, stop, progress)
            except EnvironmentBuildError as exc:
                # An agent that does not install fails every task alike: the job's, not a
                # task's.
                if stop.is_set():
                    return False  # cancelled, or this plane stopping: the job's status says
                return self._fail(job_id, str(exc))
        if unbuilt and len(unbuilt) == len(spec.cases):
            return self._fail(job_id, _none_built(unbuilt))
        with self.sessions.begin() as session:
            started = start_built_job(session, job_id, images, unbuilt)
        if started:
            self.on_ready()
        return started

    def _images(
        self,
        job_id: str,
        spec: JobSpec,
        built: dict[str, BuiltEnvironment | Unbuilt],
        agents: dict[str, AgentEnvironment],
        stop: threading.Event,
        progress: BuildProgress,
    ) -> dict[tuple[str, str], tuple[str, str | None]]:
        """The image (and digest) of each (case, variant) that runs in one: the case's
        environment, or an agent installed above it (or above the bare sandbox). Variants
        that install the same agent above the same environment share its layer, looked up
        once, since even a cached layer's key costs a download of its wheels."""
        images: dict[tuple[str, str], tuple[str, str | None]] = {}
        layers: dict[tuple[str, str], BuiltEnvironment] = {}
        installed: dict[str, bool] = {}  # variant -> whether a layer of it was built now
        try:
            for case in spec.cases:
                found = built.get(case)
                if isinstance(found, Unbuilt):
                    continue
                for variant in spec.arms:
                    if variant not in agents:
                        if found is not None:
                            images[(case, variant)] = (found.ref, found.digest)
                        continue
                    base = found or self._sandbox_environment(stop)
                    key = (base.ref, agents[variant].model_dump_json())
                    if key not in layers:
                        name = f"agent {variant}"
                        told = functools.partial(progress.agent_line, name)
                        layers[key] = self._install(base, agents[variant], told)
                    layered = layers[key]
                    installed[variant] = installed.get(variant, False) or layered.built_now
                    self._hold(job_id, base.ref, layered.ref)
                    images[(case, variant)] = (layered.ref, layered.digest)
        except EnvironmentBuildError:
            for variant in (v for v in spec.arms if v in agents):
                progress.end(f"agent {variant}", failed=variant not in installed)
            raise
        for variant, built_now in installed.items():
            progress.end(f"agent {variant}", built=built_now)
        return images

    def _build_all(
        self,
        job_id: str,
        cases: list[str],
        sources: dict[str, EnvironmentSource],
        stop: threading.Event,
        progress: BuildProgress,
        lane: Lane,
    ) -> dict[str, BuiltEnvironment | Unbuilt] | None:
        """Each case's environment, built side by side up to the box's build cap (the
        builder's slots, taken in the team's `lane`), or why it did not build; None when the
        job stopped building (cancelled, or planned by another plane) meanwhile. The results
        do not depend on the order the builds end in."""
        mine = [case for case in cases if case in sources]
        progress.write(force=True)
        if not mine:
            return {} if self._building(job_id) else None

        def one(case: str) -> BuiltEnvironment | Unbuilt:
            try:
                built = self._build(
                    sources[case], stop, lambda line: progress.line(case, line), lane
                )
            except EnvironmentBuildError as exc:
                step = _step_number(exc.step)
                progress.end(case, failed=True, failed_step=step)
                if stop.is_set():
                    raise
                # The task's own trials end with its build's error; the others run.
                return Unbuilt(str(exc), step)
            progress.end(case, built=built.built_now)
            self._hold(job_id, built.ref)  # kept by the image cache from now on
            return built

        # Every build of the job waits at the box's slots (up to a bound on threads), so that
        # the slots, not this pool, decide whose build goes next (build_slots.py).
        workers = max(1, min(len(mine), MAX_WAITING_BUILDS))
        with ThreadPoolExecutor(workers, thread_name_prefix=f"examhall-build-{job_id}") as pool:
            futures = {case: pool.submit(one, case) for case in mine}
            pending: set[Future[BuiltEnvironment | Unbuilt]] = set(futures.values())
            while pending:
                _, pending = wait(pending, timeout=WRITE_EVERY_S)
                if not stop.is_set() and not self._building(job_id):
                    stop.set()  # the builds of a job no one waits for any more
        if stop.is_set():
            return None
        # In the job's order, so that the first fault of ours raised is always the same.
        return {case: future.result() for case, future in futures.items()}

    def _hold(self, job_id: str, *refs: str) -> None:
        with self._lock:
            self._holding.setdefault(job_id, set()).update(refs)

    def _sandbox_environment(self, cancel: threading.Event | None) -> BuiltEnvironment:
        """The bare sandbox as an environment, for an agent installed above a case that has
        none of its own (built once, like any environment)."""
        dockerfile = f"FROM {self.builder.sandbox_image}\n".encode()
        source = dockerfile_source("the sandbox image", {"Dockerfile": dockerfile})
        return self._build(source, cancel)

    def _install(
        self, base: BuiltEnvironment, agent: AgentEnvironment, progress: Callable[[str], None]
    ) -> BuiltEnvironment:
        try:
            return ensure_agent_layer(self.builder, base, agent, progress)
        except EnvironmentBuildError as exc:
            name = agent.catalogue or " ".join(agent.pip)
            raise EnvironmentBuildError(
                f"Installing the agent {name} above {base.ref} failed: {exc}", log=exc.log
            ) from None

    @staticmethod
    def _sources(session: Session, job: Job, spec: JobSpec) -> dict[str, EnvironmentSource]:
        """What each case of the job that has an environment of its own is built from."""
        suite_format, suite = stored(session, job.suite_sha256, job.suite_name)
        return suite_format.environment_sources(suite, spec.cases, spec.environments or {})

    def _build(
        self,
        source: EnvironmentSource,
        cancel: threading.Event | None,
        progress: Callable[[str], None] | None = None,
        lane: Lane = NO_LANE,
    ) -> BuiltEnvironment:
        content_hash = self.builder.content_hash(source)
        started: list[bool] = []

        def start() -> None:
            # Recorded once the build holds its slot: one still waiting has not started, and
            # a cancel while it waits records nothing over another plane's running build.
            started.append(True)
            try:
                with self.sessions.begin() as session:
                    builds.started(session, content_hash, source.name)
            except IntegrityError:
                pass  # another control plane is building it too: the engine's tag decides

        lines: list[str] = []

        def told(line: str) -> None:
            lines.append(line)
            if progress is not None:
                progress(line)

        try:
            built = self.builder.build(source, told, cancel, lane, on_start=start)
        except EnvironmentBuildError as exc:
            if started:
                with self.sessions.begin() as session:
                    builds.failed(session, content_hash, exc.log or "\n".join(lines))
            raise
        if not started:
            start()  # found built: its row is named as a build's would be
        with self.sessions.begin() as session:
            builds.built(session, content_hash, built.ref, built.digest, "\n".join(lines))
        return built

    def _fail(self, job_id: str, error: str) -> bool:
        log.warning("job %s cannot run: %s", job_id, error)
        with self.sessions.begin() as session:
            fail_job(session, job_id, error)
        self.on_ready()
        return False


def _step_number(step: str | None) -> str | None:
    """The "Step 3/5" of the builder's "Step 3/5 : RUN ..." line."""
    found = _STEP.match(step or "")
    return found[0] if found else None


def _none_built(unbuilt: dict[str, Unbuilt]) -> str:
    if len(unbuilt) == 1:
        return next(iter(unbuilt.values())).error
    return f"None of the job's {len(unbuilt)} environments built:\n\n" + "\n\n".join(
        why.error for why in unbuilt.values()
    )


def make_preparer(
    sessions: sessionmaker[Session], backend: SandboxBackend, *, on_ready: Callable[[], None]
) -> EnvironmentPreparer | None:
    """The preparer of a backend that runs images built on this control plane's engine
    (Docker's, Swarm's), else None: task suites are then refused at submission."""
    if not isinstance(backend, BuildsImages):
        return None
    engine, sandbox_image = backend.build_engine()
    builder = EnvironmentBuilder(engine, sandbox_image=sandbox_image, owner=backend.owner)
    limit = builder.settings.image_cache_gb
    cache = ImageCache(
        engine,
        [builder.repository, f"{builder.repository}-agent"],
        limit_bytes=None if limit is None else int(limit * 1e9),
    )
    return EnvironmentPreparer(sessions, builder, on_ready=on_ready, cache=cache)
