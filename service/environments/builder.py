"""The control plane's builder of task environments: a task image from its source, then
examhall's worker layer on it, tagged by the content hash of everything that went in.

A present `examhall/env:<hash12>` whose label carries the full hash is the environment,
with no builder call: the cache is the engine's tags, so it holds across jobs and control
planes, and a cached environment costs a trial's start a few engine lookups at most.
"""

from __future__ import annotations

import contextlib
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from service.environments.build_slots import NO_LANE, Lane, build_slots
from service.environments.dockerfile import rewrite_images
from service.environments.errors import BoxFault, EnvironmentBuildError, EnvironmentProblem
from service.environments.hashing import environment_digest
from service.environments.image_map import (
    NeedsBootstrap,
    Resolved,
    parse_image_map,
    resolve_image,
)
from service.environments.source import DOCKERFILE, EnvironmentSource
from service.environments.spec import WHEELS_DIR, compile_dockerfile, context_files
from service.environments.trust import trusting_base
from service.environments.worker_layer import (
    WORKDIR_LABEL,
    check_image,
    layer_context,
    recipe_fingerprint,
)
from service.images.build_network import DEFAULT_EGRESS
from service.images.capped import Caps
from service.images.capped_build import BuildError, BuildLimits, BuildLog
from service.images.debian_base import (
    DEBIAN_BASE_REPO,
    ImageBuildError,
    Progress,
    debian_suite,
    find_mirror,
)
from service.images.engine import EngineError, ImageEngine
from service.images.sandbox_image import HASH_LABEL, BuildContext
from service.images.wheels import download_wheels
from service.settings import Settings, env_name, get_settings

ENV_REPO = "examhall/env"
# The tag of a failed build's steps before the step that failed: `<hash12>-resume`.
RESUME_SUFFIX = "-resume"
NAME_LABEL = "examhall.environment"
# The first line of every build that runs steps (a cached environment prints none): a job's
# build progress starts a task's clock at it (service/scheduler/build_progress.py).
BUILDING = "Building the environment of"


@dataclass(frozen=True)
class BuiltEnvironment:
    ref: str  # examhall/env:<hash12>
    digest: str  # the image id
    content_hash: str
    workdir: str | None  # the task's working directory, where the workspace is mounted
    # Built by this call, not found by its hash: what a job's build progress tells its users
    # (service/scheduler/build_progress.py) as built or cached.
    built_now: bool = field(default=False, compare=False)


@dataclass(frozen=True)
class _Prepared:
    """A source read and its FROM images resolved: what the hash covers and the build uses."""

    dockerfile: str
    files: dict[str, bytes]
    images: tuple[Resolved, ...]
    digest: str


class EnvironmentBuilder:
    def __init__(
        self,
        engine: ImageEngine,
        *,
        sandbox_image: str,
        settings: Settings | None = None,
        repository: str = ENV_REPO,
        owner: str | None = None,
    ) -> None:
        self.engine = engine
        # The control plane building (service/owners.py): on the containers that run a team's
        # image during a build, so that a plane that dies leaves them to the next one's reaper.
        self.owner = owner
        self.sandbox_image = sandbox_image
        self._settings = settings
        # Where environments are tagged; tests use one of their own.
        self.repository = repository

    @property
    def settings(self) -> Settings:
        return self._settings or get_settings()

    def content_hash(self, source: EnvironmentSource) -> str:
        return self._prepare(source, bootstrap=None).digest

    def cached(self, source: EnvironmentSource) -> BuiltEnvironment | None:
        """The environment if it is built already; None if it must be built."""
        try:
            digest = self._prepare(source, bootstrap=None).digest
        except EnvironmentBuildError as exc:
            if isinstance(exc.__cause__, NeedsBootstrap):
                return None
            raise
        return self._lookup(digest)

    def build(
        self,
        source: EnvironmentSource,
        progress: Progress,
        cancel: threading.Event | None = None,
        lane: Lane = NO_LANE,
        on_start: Callable[[], None] | None = None,
    ) -> BuiltEnvironment:
        """The environment, built unless it is already; EnvironmentBuildError if it cannot
        be, or if `cancel` is set before it is. `lane`: whose build it is, for its turn at
        the box's build slots (service/environments/build_slots.py); `on_start` is called
        once the build holds its slot and starts, not while it waits."""
        prepared = self._prepare(source, bootstrap=progress)
        found = self._lookup(prepared.digest)
        if found is not None:
            progress(f"Environment of {source.name} is built already: {found.ref}.")
            return found
        settings = self.settings.checked(
            "build_timeout_s",
            "build_memory",
            "build_cpu_shares",
            "build_network",
            "build_pids",
            "build_disk",
        )
        timeout = settings.build_timeout_s
        if source.build_timeout_s is not None:
            timeout = min(timeout, source.build_timeout_s)
        with self._slot(settings, progress, lane, cancel):
            # Another thread may have built it while this one waited for the slot.
            found = self._lookup(prepared.digest)
            if found is not None:
                return found
            if on_start is not None:
                on_start()
            # The build's time runs from its slot: a wait behind other teams' builds is not it.
            deadline = time.monotonic() + timeout
            return self._build(source, prepared, settings, deadline, timeout, progress, cancel)

    def allowed_images(self) -> tuple[str, ...]:
        """The images a build may name besides EXAMHALL_IMAGE_MAP's targets: the sandbox
        image, the base it is built on, and the bootstrapped Debian base."""
        return (
            self.sandbox_image,
            self.settings.sandbox_base,
            f"{DEBIAN_BASE_REPO}:{debian_suite()}",
        )

    def limits(self, network: str | None) -> BuildLimits:
        """The caps of one build whose RUN steps use `network`."""
        settings = self.settings
        return BuildLimits(
            memory=settings.build_memory,
            cpu_shares=settings.build_cpu_shares,
            network=network,
            pids=settings.build_pids,
            disk=settings.build_disk,
            pen_image=self.sandbox_image,
            owner=self.owner,
        )

    # -- internals

    def _network(self, settings: Settings) -> tuple[str, dict[str, str]]:
        """The network of the build's RUN steps, and the build arguments that point them at
        the build proxy (build_network.py) when it is examhall's own."""
        if settings.build_network is not None:
            return settings.build_network, {}
        hosts = set(DEFAULT_EGRESS)
        if settings.build_egress is not None:
            hosts = {h for h in settings.build_egress.split(",") if h.strip()}
        else:
            mirror = find_mirror(debian_suite())
            if mirror and urlsplit(mirror).hostname:
                hosts.add(str(urlsplit(mirror).hostname))
        network = self.engine.build_network(self.sandbox_image, hosts)
        return network.name, network.build_args()

    def _lookup(self, digest: str) -> BuiltEnvironment | None:
        ref = f"{self.repository}:{digest[:12]}"
        image = self.engine.image(ref)
        if image is None or image.labels.get(HASH_LABEL) != digest:
            return None
        return BuiltEnvironment(ref, image.id, digest, image.labels.get(WORKDIR_LABEL) or None)

    @contextmanager
    def _slot(
        self, settings: Settings, progress: Progress, lane: Lane, cancel: threading.Event | None
    ) -> Iterator[None]:
        slots = build_slots(settings.build_concurrency)
        if not slots.try_acquire(lane):
            progress(
                f"Waiting for a build slot ({env_name('build_concurrency')}: "
                f"{settings.build_concurrency}, shared by the teams building)..."
            )
            if not slots.acquire(lane, cancel):
                raise EnvironmentBuildError("The build was cancelled before it started.")
        try:
            yield
        finally:
            slots.release(lane)

    def _prepare(self, source: EnvironmentSource, *, bootstrap: Progress | None) -> _Prepared:
        settings = self.settings
        try:
            image_map = parse_image_map(settings.image_map)
            if source.declarative is not None:
                original = compile_dockerfile(source.declarative, settings)
                files = context_files(source.declarative)
            else:
                files = {p: d for p, d in source.files.items() if p != DOCKERFILE}
                original = source.files[DOCKERFILE].decode()
            found: list[Resolved] = []

            bundle = Path(settings.ca_bundle).read_bytes() if settings.ca_bundle else None

            def resolve(reference: str) -> str:
                resolved = self._resolve(reference, image_map, bootstrap)
                found.append(resolved)
                # The engine gets the id alone: no name it could look up differently.
                if bundle is None:
                    return resolved.image_id
                return trusting_base(
                    self.engine,
                    resolved.image_id,
                    bundle,
                    repository=self.repository,
                    limits=self.limits("none"),
                )

            dockerfile = rewrite_images(original, resolve).text
        except (EnvironmentProblem, ImageBuildError, EngineError, UnicodeDecodeError) as exc:
            raise EnvironmentBuildError(f"The environment of {source.name}: {exc}.") from exc
        except (BuildError, OSError) as exc:
            # The operator's bundle could not be read or layered: the box's, not the task's.
            raise BoxFault(
                f"The certificate authorities of EXAMHALL_CA_BUNDLE could not be added to the "
                f"base of {source.name}: {exc}"
            ) from exc
        sandbox = self.engine.image(self.sandbox_image)
        if sandbox is None:
            raise EnvironmentBuildError(
                f"The environment of {source.name}: the sandbox image {self.sandbox_image} is "
                f"not present; build it with `examhall image build`."
            )
        sandbox_id = sandbox.id
        digest = environment_digest(
            recipe=recipe_fingerprint(),
            sandbox=self.sandbox_image,
            sandbox_id=sandbox_id,
            dockerfile=dockerfile,
            images=[(r.reference, r.image_id) for r in found],
            declarative=source.declarative.canonical() if source.declarative else b"",
            workdir=source.workdir,
            executable=source.executable,
            files=files,
        )
        return _Prepared(dockerfile, files, tuple(found), digest)

    def _resolve(
        self, reference: str, image_map: dict[str, str], bootstrap: Progress | None
    ) -> Resolved:
        allowed = self.allowed_images()
        try:
            resolved = resolve_image(self.engine, reference, image_map, allowed)
        except NeedsBootstrap as exc:
            if bootstrap is None:
                raise
            bootstrap(f"{reference}: bootstrapping the Debian {exc.suite} base it falls back to")
            self.engine.bootstrap_debian_base(exc.suite, bootstrap)
            resolved = resolve_image(self.engine, reference, image_map, allowed)
        if resolved.note and bootstrap is not None:
            bootstrap(resolved.note + ".")
        return resolved

    def _build(
        self,
        source: EnvironmentSource,
        prepared: _Prepared,
        settings: Settings,
        deadline: float,
        timeout: float,
        progress: Progress,
        cancel: threading.Event | None,
    ) -> BuiltEnvironment:
        log = BuildLog()

        def caps() -> Caps:
            # Every run of the team's image counts against the build's own deadline.
            left = max(deadline - time.monotonic(), 0.0)
            return Caps(
                settings.build_memory,
                settings.build_pids,
                settings.build_cpu_shares,
                left,
                owner=self.owner,
            )

        network, build_args = self._network(settings)
        limits = self.limits(network)
        ref = f"{self.repository}:{prepared.digest[:12]}"
        started = time.monotonic()
        started_wall = time.time()
        progress(f"{BUILDING} {source.name} ({ref})...")
        for image in prepared.images:
            # The engine is given ids alone (dockerfile.py): say which image each one is.
            named = image.reference if image.image == image.reference else image.image
            line = f"{image.reference} is {image.image_id} ({named})"
            log.add(line)
            progress(line)
        # Where a failed step leaves the steps before it, for the next build to resume from:
        # in the environments' repository, so the image cache keeps it under its limit.
        resume = f"{self.repository}:{prepared.digest[:12]}{RESUME_SUFFIX}"
        try:
            files = dict(prepared.files)
            if source.declarative is not None and source.declarative.pip:
                files.update(self._wheels(source, prepared, progress, caps(), cancel))
            context = BuildContext(
                prepared.dockerfile.encode(),
                tuple(sorted(files.items())),
                source.executable,
            )
            task_id = self.engine.build(
                context.tarball(),
                tag=None,
                labels={},
                buildargs=build_args,
                limits=limits,
                timeout_s=deadline - time.monotonic(),
                progress=progress,
                log=log,
                cancel=cancel,
                keep_as=resume,
            )
            progress(f"Adding examhall's worker to the environment of {source.name}...")
            task = check_image(
                self.engine, task_id, workdir=source.workdir, caps=caps(), cancel=cancel
            )
            if task.python is None:
                progress("The image has no python3 >= 3.11 the worker can use; bundling one.")
            labels = {HASH_LABEL: prepared.digest, NAME_LABEL: source.name[:200]}
            if task.workdir:
                labels[WORKDIR_LABEL] = task.workdir
            # The layer needs no network: everything comes from the two images.
            layer_limits = self.limits("none")
            image_id = self.engine.build(
                layer_context(task, self.sandbox_image).tarball(),
                tag=ref,
                labels=labels,
                limits=layer_limits,
                timeout_s=deadline - time.monotonic(),
                progress=progress,
                log=log,
                cancel=cancel,
            )
        except BuildError as exc:
            self._box_fault(source, network, started_wall, exc)
            step = exc.log.step
            where = f" at {step!r}" if step else ""
            advice = (
                f"raise EXAMHALL_BUILD_TIMEOUT_S (now {timeout:.0f} s) if the build needs longer"
                if exc.timed_out
                else f"raise EXAMHALL_BUILD_DISK (now {settings.build_disk / 1024**2:.0f} MiB) "
                "if the environment needs more"
                if exc.over_disk
                else "submit the job again when you want it built"
                if exc.cancelled
                else "fix the step (the whole log is kept with the build)"
            )
            raise EnvironmentBuildError(
                f"The environment of {source.name} failed to build{where}: {exc.message}\n"
                f"Last build output:\n{exc.log.tail()}\n{advice[0].upper()}{advice[1:]}.",
                log=exc.log.text(),
                step=step,
            ) from exc
        except (EnvironmentProblem, ImageBuildError) as exc:
            log.add(str(exc))
            self.engine.discard_build(log)
            raise EnvironmentBuildError(
                f"The environment of {source.name} is refused: {exc}.",
                log=log.text(),
                step="checking the image",
            ) from exc
        except EngineError as exc:
            log.add(str(exc))
            self.engine.discard_build(log)
            raise EnvironmentBuildError(
                f"The environment of {source.name} could not be built: the Docker engine "
                f"failed ({exc}); check the engine and retry.",
                log=log.text(),
                step=log.step,
            ) from exc
        with contextlib.suppress(EngineError):
            self.engine.remove_image(resume)  # an earlier failure's steps: under ref's now
        progress(f"Built {ref} in {time.monotonic() - started:.1f} s.")
        return BuiltEnvironment(ref, image_id, prepared.digest, task.workdir, built_now=True)

    def _box_fault(
        self, source: EnvironmentSource, network: str, since: float, failed: BuildError
    ) -> None:
        """Raise BoxFault when the build failed because the box's build proxy could not reach
        out (it logged so meanwhile), after putting a new proxy in its place."""
        if network == "none" or failed.cancelled:
            return
        faults = self.engine.build_proxy_faults(since - 1)
        if not faults:
            return
        self.engine.replace_build_proxy()
        raise BoxFault(
            f"The build of {source.name} could not reach what it fetches through the box's "
            f"build proxy, a fault of the box and not of the environment (the proxy logged: "
            f"{'; '.join(faults[-3:])}); the proxy is replaced and the job prepared again."
        ) from failed

    def _wheels(
        self,
        source: EnvironmentSource,
        prepared: _Prepared,
        progress: Progress,
        caps: Caps,
        cancel: threading.Event | None,
    ) -> dict[str, bytes]:
        assert source.declarative is not None
        base = prepared.images[0].image_id
        try:
            found = self.engine.image_python(base, caps=caps, cancel=cancel)
        except ImageBuildError as exc:
            raise EnvironmentProblem(
                f"pip requirements need python3 in the base image, and {prepared.images[0].image}"
                f" has none that runs ({exc}); choose a base with python3, or install the "
                f"tools with apt"
            ) from exc
        with tempfile.TemporaryDirectory(prefix="examhall-env-wheels-") as scratch:
            download_wheels(
                source.declarative.pip, found.version, Path(scratch), progress, glibc=found.glibc
            )
            return {
                f"{WHEELS_DIR}/{path.name}": path.read_bytes()
                for path in sorted(Path(scratch).iterdir())
            }
