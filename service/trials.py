"""Running one trial end to end: the request in, the worker's messages out, one result."""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from sandbox.protocol import (
    ArtifactMessage,
    ErrorKind,
    Event,
    EventMessage,
    ResultMessage,
    RunRequest,
    RunSpec,
    StepMessage,
    TrialResult,
    WorkerMessage,
    encode,
)
from sandbox.relay import ModelCallMessage, ModelReplyMessage
from service.artifact_names import artifact_name_problem
from service.backends.docker import ContainerRun, DockerBackend


@dataclass
class TrialRecord:
    trial_id: str
    result: TrialResult
    events: list[Event] = field(default_factory=list)
    artifacts: dict[str, bytes] = field(default_factory=dict)
    steps: list[str] = field(default_factory=list)
    container: ContainerRun | None = None
    wall_s: float = 0.0
    # Set by the gateway for relayed models with a price; None is unknown, never zero.
    cost_usd: float | None = None


class _Collector:
    def __init__(self, on_event: Callable[[Event], None] | None) -> None:
        self.on_event = on_event
        self.events: list[Event] = []
        self.artifacts: dict[str, bytes] = {}
        self.steps: list[str] = []
        self.result: TrialResult | None = None
        self.problems: list[str] = []

    def __call__(self, message: WorkerMessage) -> None:
        if isinstance(message, EventMessage):
            self.events.append(message.event)
            if self.on_event is not None:
                self.on_event(message.event)
        elif isinstance(message, StepMessage):
            self.steps.append(message.step)
        elif isinstance(message, ArtifactMessage):
            if problem := artifact_name_problem(message.name):
                self.problems.append(f"An artifact was not kept: {problem}.")
                return
            content = base64.b64decode(message.content_b64)
            if hashlib.sha256(content).hexdigest() != message.sha256:
                self.problems.append(f"Artifact {message.name} does not match its sha256.")
                return
            self.artifacts[message.name] = content
        elif isinstance(message, ResultMessage):
            if self.result is not None:
                self.problems.append("The worker sent a second result; the first one stands.")
                return
            self.result = message.result
        else:
            self.problems.append(f"Unexpected {message.type} message during a run.")


SESSION = "session.jsonl"


def session_jsonl(events: list[Event]) -> bytes:
    """The session artifact's form: one JSON event a line, as the supervisor writes it."""
    return b"".join(encode(event) for event in events)


def _error(kind: ErrorKind, message: str, step: str | None = None) -> TrialResult:
    return TrialResult(outcome="error", error_kind=kind, error_message=message, failed_step=step)


def settle(run: ContainerRun, collected: TrialResult | None, deadline_s: float) -> TrialResult:
    """The trial's one outcome, from what the worker said and what the container did."""
    if run.infra_error is not None:
        return _error("infra_error", run.infra_error)
    if run.timed_out:
        message = f"The trial passed its {deadline_s:g} s deadline; its container was killed."
        if collected is None:
            return _error("timeout", message)
        return dataclasses.replace(
            collected, outcome="error", error_kind="timeout", error_message=message, score=None
        )
    if collected is not None:
        # A tool killed for memory inside a trial that still finished is the agent's
        # business (it saw the kill); only a worker that died for it ends the trial here.
        return collected
    if run.oom_killed:
        return _error(
            "limit_exceeded", "The trial's container ran out of memory and the worker was killed."
        )
    # The root supervisor reports every death of the sandboxed worker, so a container that
    # ended with no result at all was ended from outside (the daemon, an operator): retry it.
    detail = run.channel_error or run.stderr_tail.strip()[-2000:] or "no output"
    return _error(
        "infra_error", f"The container exited with code {run.exit_code} without a result: {detail}"
    )


def run_trial(
    backend: DockerBackend,
    spec: RunSpec,
    *,
    job_id: str,
    deadline_s: float,
    on_event: Callable[[Event], None] | None = None,
    on_model_call: Callable[[ModelCallMessage], ModelReplyMessage] | None = None,
) -> TrialRecord:
    """Run one trial; a spec with provider settings (direct credentials) gets egress."""
    started = time.monotonic()
    collector = _Collector(on_event)
    run = backend.run(
        trial_id=spec.trial_id,
        job_id=job_id,
        request=encode(RunRequest(spec=spec)),
        deadline_s=deadline_s,
        on_message=collector,
        on_model_call=on_model_call,
        egress=spec.provider is not None,
    )
    result = settle(run, collector.result, deadline_s)
    timings = {**result.timings, **{f"container_{k}": v for k, v in run.timings.items()}}
    artifacts = collector.artifacts
    if SESSION not in artifacts:
        # Killed at its deadline or cut off before the supervisor sent it: the transcript
        # is kept as far as it got, from the events that did arrive.
        artifacts[SESSION] = session_jsonl(collector.events)
    return TrialRecord(
        cost_usd=result.cost_usd,
        trial_id=spec.trial_id,
        result=dataclasses.replace(result, timings=timings),
        events=collector.events,
        artifacts=artifacts,
        steps=collector.steps,
        container=run,
        wall_s=time.monotonic() - started,
    )
