"""What the control plane needs from a place that runs sandboxes.

A backend starts one sandbox per launch and hands back its channel: the worker's stdin and
stdout, as bytes. Everything above (the conversation with the worker, the deadline, settling
the trial's outcome) is written once, in `service/launch/`, for every backend. A backend is
one folder under `service/backends/` and one line in `registry.py`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from service.images.engine import ImageEngine

# The trial id on a warm pool's slot (service/backends/pool_keeper.py): it names no trial
# of any store, so a reaper tells it apart and removes it once its plane is gone.
POOL_PREFIX = "pool-"


class SandboxError(Exception):
    """The backend could not do what was asked (start, wait): the trial's `infra_error`."""


@dataclass(frozen=True)
class Resources:
    """What one sandbox may use."""

    memory_bytes: int = 1024 * 1024 * 1024
    cpus: float = 1.0
    pids: int = 256
    workspace_bytes: int = 256 * 1024 * 1024
    tmp_bytes: int = 64 * 1024 * 1024


@dataclass(frozen=True)
class LaunchSpec:
    """One sandbox to start: for which trial (or suite listing) of which job."""

    trial_id: str
    job_id: str
    # Direct-credentials trials call their provider themselves, so they get a network.
    egress: bool = False
    # A task environment's image (service/environments) instead of the backend's own; such
    # a sandbox also gets the root-only /tests, /logs and /solution its verifier uses.
    image: str | None = None
    # A task's own limits (Harbor's memory_mb, cpus, storage_mb), within the box's caps.
    memory_bytes: int | None = None
    cpus: float | None = None
    workspace_bytes: int | None = None
    # The team whose trial (or listing) this is; None for an admin's. A warm pool keeps its
    # slots per team, within the team's cap (service/backends/pool_keeper.py).
    team_id: str | None = None


@dataclass(frozen=True)
class SandboxExit:
    exit_code: int
    oom_killed: bool = False
    # Set when the sandbox was lost to the infrastructure (its node died or was drained):
    # whatever the worker said, the attempt is an `infra_error` and is run again. Only the
    # backend, from outside the sandbox, can say so.
    lost: str | None = None
    # The engine's own error for a container it could not run (Docker's State.Error): why a
    # sandbox that said nothing ended, in the operator's words rather than "no output".
    engine_error: str | None = None


@dataclass(frozen=True)
class NodeStatus:
    """One machine a backend runs sandboxes on, for /healthz and /metrics."""

    name: str
    # ready (takes trials), drained (an operator took it out), or down.
    state: str
    # examhall's sandboxes running there now, whichever control plane started them.
    trials: int


@dataclass(frozen=True)
class FoundSandbox:
    """A sandbox the backend found on its engine, as `reap` offers it to a policy."""

    trial_id: str
    # The control plane that started it (`service/owners.py`).
    owner: str


# Given what a backend found, which to remove. Called after listing, so a policy that asks
# who is running now sees every sandbox started before the listing.
ReapPolicy = Callable[[Sequence[FoundSandbox]], Sequence[FoundSandbox]]


class Channel(Protocol):
    """The byte stream to and from the worker."""

    def send(self, data: bytes) -> None:
        """Write to the worker's stdin; raises OSError when the channel is gone."""

    def read(self) -> bytes:
        """The next bytes of the worker's stdout; b"" once it ended. Raises OSError."""

    def stderr_tail(self) -> str:
        """The last of what the worker wrote to stderr, for error messages."""

    def close(self) -> None: ...


class Sandbox(Protocol):
    id: str
    # The machine it runs on, by name (a swarm node; the engine on one box), when known.
    node: str | None
    channel: Channel
    # How long the backend's own steps of the start took (e.g. create, start), in seconds.
    timings: dict[str, float]

    def kill(self) -> None:
        """End the sandbox now; a sandbox already gone is not an error."""

    def wait(self, timeout_s: float) -> SandboxExit:
        """How the sandbox ended; raises SandboxError when that cannot be learnt."""

    def remove(self) -> None:
        """Remove what the sandbox left; never raises."""


class SandboxBackend(Protocol):
    # Which backend this is, as the registry names it.
    name: str
    # The sandbox image every launch runs, and its digest when known: recorded on each job.
    image: str
    image_digest: str | None
    # This control plane's identity on the sandboxes it starts.
    owner: str

    def start(self, launch: LaunchSpec) -> Sandbox:
        """A started sandbox with its channel attached; raises SandboxError."""

    def health(self) -> str:
        """ "ok", or what is wrong with the engine."""

    def reap(self, policy: ReapPolicy) -> list[str]:
        """Remove this backend's sandboxes that `policy` picks; returns their trial ids."""

    def nodes(self) -> list[NodeStatus]:
        """The machines sandboxes run on and how many run on each; raises SandboxError
        when the engine cannot be asked."""


@runtime_checkable
class KeepsPool(Protocol):
    """A backend that keeps containers started ahead of the trials that take them."""

    def limit_pool(
        self, room: Callable[[], int], team_room: Callable[[], Mapping[str, int]] | None = None
    ) -> None:
        """Let the pool hold no more than `room()`, the box's container slots free now, and
        for a capped team's trials no more than `team_room()` gives that team: the containers
        it may still start box-wide (a team absent is uncapped)."""

    def close_pool(self) -> None:
        """Remove every container the pool holds and stop filling it (the plane stops)."""


@runtime_checkable
class BuildsImages(Protocol):
    """A backend whose sandboxes can run images built on this control plane's Docker engine
    (task environments, agent layers): Docker's, and Swarm's, which pushes them to its nodes."""

    def build_engine(self) -> tuple[ImageEngine, str]:
        """The engine to build on and the sandbox image there."""
