"""Starting sandboxes on a backend and seeing each one through to its removal.

The launcher is the one place that knows which sandboxes this control plane runs now: the
scheduler stops them (a cancel, a shutdown) and the reaper spares them through it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence

from service.backends.base import (
    FoundSandbox,
    LaunchSpec,
    Sandbox,
    SandboxBackend,
    SandboxError,
)
from service.launch.egress import TrialEgress
from service.launch.worker_channel import OnMessage, OnModelCall, SandboxRun, converse

log = logging.getLogger(__name__)


class Launcher:
    def __init__(self, backend: SandboxBackend) -> None:
        self.backend = backend
        # Running trials and their sandboxes (None while starting).
        self._running: dict[str, Sandbox | None] = {}
        # Trials stopped while their sandbox was starting: killed as soon as it is up.
        self._stopped: set[str] = set()
        self._lock = threading.Lock()

    def run(
        self,
        launch: LaunchSpec,
        request: bytes,
        *,
        deadline_s: float,
        on_message: OnMessage,
        on_model_call: OnModelCall | None = None,
        egress: TrialEgress | None = None,
    ) -> SandboxRun:
        """Run one worker to its end (or the deadline); the sandbox is removed in every case.
        Never raises for the sandbox's faults: they come back on the run. Nor for its
        cleanup's: what the worker reported stands even when the engine is too slow to
        remove the sandbox (the reaper removes it later)."""
        run = SandboxRun()
        sandbox: Sandbox | None = None
        with self._lock:
            self._running[launch.trial_id] = None
        try:
            try:
                sandbox = self.backend.start(launch)
            except SandboxError as exc:
                run.infra_error = str(exc)
                return run
            run.sandbox_id = sandbox.id
            run.node = sandbox.node
            run.timings.update(sandbox.timings)
            with self._lock:
                self._running[launch.trial_id] = sandbox
                stopped = launch.trial_id in self._stopped
            if stopped:
                _kill(sandbox)
            run.started_at = time.monotonic()
            try:
                converse(
                    sandbox,
                    request,
                    run,
                    deadline_s=deadline_s,
                    on_message=on_message,
                    on_model_call=on_model_call,
                    egress=egress,
                )
            except Exception as exc:
                # A fault of ours or the backend's past the start: what was collected is
                # kept, and `settle` judges the run as one whose channel broke.
                log.exception("trial %s: the conversation failed", launch.trial_id)
                run.channel_error = f"The control plane's conversation failed: {exc!r}"
            return run
        finally:
            t1 = time.monotonic()
            if sandbox is not None:
                try:
                    sandbox.remove()
                except Exception:
                    # The protocol says remove never raises; a backend that does must not
                    # turn the trial's result into an error. The reaper removes it later.
                    log.exception("trial %s: its sandbox was not removed", launch.trial_id)
            run.timings["teardown"] = time.monotonic() - t1
            run.ended_at = time.monotonic()
            with self._lock:
                self._running.pop(launch.trial_id, None)
                self._stopped.discard(launch.trial_id)

    def running_trials(self) -> set[str]:
        with self._lock:
            return set(self._running)

    def stop(self, trial_ids: set[str]) -> None:
        """Kill these trials' sandboxes; their runs return at once and remove them."""
        with self._lock:
            sandboxes = [s for t, s in self._running.items() if t in trial_ids and s is not None]
            self._stopped.update(
                t for t, s in self._running.items() if t in trial_ids and s is None
            )
        for sandbox in sandboxes:
            _kill(sandbox)

    def stop_all(self) -> None:
        self.stop(self.running_trials())

    def reap(self, remove: Callable[[FoundSandbox], bool]) -> list[str]:
        """Remove the backend's sandboxes that `remove` picks, sparing those running here."""

        def policy(found: Sequence[FoundSandbox]) -> list[FoundSandbox]:
            # Read after the backend listed: a trial that started in between is running by
            # now, and its new sandbox must not be taken for an orphan.
            running = self.running_trials()
            return [f for f in found if f.trial_id not in running and remove(f)]

        return self.backend.reap(policy)


def _kill(sandbox: Sandbox) -> None:
    """Kill a sandbox without letting a backend's error out (its removal follows anyway)."""
    try:
        sandbox.kill()
    except Exception:
        log.exception("sandbox %s: the kill failed", sandbox.id)
