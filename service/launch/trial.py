"""Running one trial end to end: the run spec in, one `TrialRecord` out.

`launch_trial` is the one launch path: the scheduler runs every stored trial through it, and
`examhall run-trial` runs a trial from the command line through it too.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from sandbox.protocol import (
    ArtifactMessage,
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
from sandbox.providers.client import Budget
from service.artifact_names import artifact_name_problem
from service.backends.base import LaunchSpec
from service.gateway import TrialGateway
from service.launch.egress import TrialEgress
from service.launch.judging import ARTIFACT, judge_gateway, route_calls, settle_judging
from service.launch.launcher import Launcher
from service.launch.settle import settle
from service.launch.worker_channel import OnModelCall, SandboxRun
from service.providers import ProviderRegistry

SESSION = "session.jsonl"


@dataclass(frozen=True)
class Placement:
    """Where a task's trial runs: its environment's image and its own limits."""

    image: str | None = None
    memory_bytes: int | None = None
    cpus: float | None = None
    workspace_bytes: int | None = None


@dataclass
class TrialRecord:
    """Everything one run of a trial produced, as the control plane keeps it."""

    trial_id: str
    result: TrialResult
    events: list[Event] = field(default_factory=list)
    artifacts: dict[str, bytes] = field(default_factory=dict)
    steps: list[str] = field(default_factory=list)
    sandbox: SandboxRun | None = None
    wall_s: float = 0.0
    # Set by the gateway for relayed models with a price; None is unknown, never zero.
    cost_usd: float | None = None
    # The judge model's usage and cost (`launch.judging`), when the job names one.
    judge_usage: dict[str, Any] | None = None


class _Collector:
    """Gathers a worker's messages into a record's parts, refusing what cannot be kept."""

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


def session_jsonl(events: list[Event]) -> bytes:
    """The session artifact's form: one JSON event a line, as the supervisor writes it."""
    return b"".join(encode(event) for event in events)


def run_trial(
    launcher: Launcher,
    spec: RunSpec,
    *,
    job_id: str,
    deadline_s: float,
    on_event: Callable[[Event], None] | None = None,
    on_model_call: OnModelCall | None = None,
    placement: Placement | None = None,
    egress: TrialEgress | None = None,
    team_id: str | None = None,
) -> TrialRecord:
    """Run one trial in a fresh sandbox (of a task environment's image and limits, when
    `placement` gives them); a spec with provider settings (direct credentials) gets the
    engine's egress network, a task's trial under an egress policy gets `egress` (the
    control plane's connections, `launch.egress`)."""
    started = time.monotonic()
    collector = _Collector(on_event)
    run = launcher.run(
        LaunchSpec(
            trial_id=spec.trial_id,
            job_id=job_id,
            egress=spec.provider is not None,
            team_id=team_id,
            **dataclasses.asdict(placement or Placement()),
        ),
        encode(RunRequest(spec=spec)),
        deadline_s=deadline_s,
        on_message=collector,
        on_model_call=on_model_call,
        egress=egress,
    )
    result = settle(
        run, collector.result, deadline_s, collector.steps[-1] if collector.steps else None
    )
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
        sandbox=run,
        wall_s=time.monotonic() - started,
    )


def launch_trial(
    launcher: Launcher,
    spec: RunSpec,
    *,
    job_id: str,
    deadline_s: float,
    budget: Budget,
    providers: ProviderRegistry,
    http: httpx.Client,
    on_event: Callable[[Event], None] | None = None,
    placement: Placement | None = None,
    judge_budget: Budget | None = None,
    egress: TrialEgress | None = None,
    team_id: str | None = None,
) -> TrialRecord:
    """Run a trial with its model reached the way its spec says: a relayed provider through
    a gateway of its own (which keeps the budget and the cost), faux and simulated inside
    the sandbox, direct credentials from the sandbox itself. The job's judge model, when it
    names one, is always reached through a gateway here, with `judge_budget`."""
    entry = providers.get(spec.model.provider)
    gateway = None
    if entry is not None and spec.provider is None:
        gateway = TrialGateway(entry, spec.model.id, budget=budget, http=http, on_event=on_event)
    judge = None
    if spec.judge_model is not None:
        judge = judge_gateway(
            spec.judge_model,
            budget=judge_budget or Budget(),
            providers=providers,
            http=http,
            on_event=on_event,
        )
    record = run_trial(
        launcher,
        spec,
        job_id=job_id,
        deadline_s=deadline_s,
        on_event=on_event,
        on_model_call=route_calls(gateway, judge),
        placement=placement,
        egress=egress,
        team_id=team_id,
    )
    if gateway is not None:
        record.cost_usd = gateway.spent.cost_usd  # authoritative: kept by the gateway
    record.result = settle_judging(record.result, judge)
    if judge is not None:
        record.judge_usage = judge.usage()
        if judge.calls:
            record.artifacts[ARTIFACT] = judge.artifact()
    return record
