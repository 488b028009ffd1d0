"""One task trial in a real sandbox, the way the control plane runs one: a task's tests/test.sh
and solution/ as the run request carries them, an agent (the oracle, nop, or a scripted
model replaying solve.sh), the root supervisor's verifier. Shared by the tests of the
verifier, of egress and of the operator's certificate authorities."""

from __future__ import annotations

import base64
import uuid
from typing import Any

from sandbox.protocol import Limits, ModelRef, RunSpec, SuiteBundle, TaskSpec
from service.backends.base import SandboxBackend
from service.launch.egress import TrialEgress
from service.launch.launcher import Launcher
from service.launch.trial import Placement, TrialRecord, run_trial


def encoded(**texts: str) -> dict[str, str]:
    """Files by name, base64-encoded as a run request carries a task's."""
    return {name: base64.b64encode(text.encode()).decode() for name, text in texts.items()}


def task_trial(
    backend: SandboxBackend,
    image: str,
    *,
    test: str,
    solve: str | None = None,
    beside: dict[str, str] | None = None,
    model: str = "simulated/coin?p=1",
    deadline_s: float = 120,
    egress: TrialEgress | None = None,
    command: tuple[str, ...] | None = None,
    **task: Any,
) -> TrialRecord:
    """The trial of a task whose tests/ is `test.sh` and whose solution/ is `solve.sh` and
    `beside`; `command` an installed agent's argv; `task` sets TaskSpec's other fields (agent,
    workdir, verifier_timeout_s, ...)."""
    solution = None if solve is None else encoded(**{"solve.sh": solve}, **(beside or {}))
    spec = RunSpec(
        trial_id=f"test-{uuid.uuid4().hex[:12]}",
        suite=SuiteBundle("tasks", ""),
        case_id="task",
        model=ModelRef.parse(model),
        limits=Limits(agent_timeout_s=60),
        command=command,
        task=TaskSpec(
            name="task",
            instruction="Do the task.",
            tests=encoded(**{"test.sh": test}),
            solution=solution,
            egress=egress is not None,
            **task,
        ),
    )
    return run_trial(
        Launcher(backend),
        spec,
        job_id="tests",
        deadline_s=deadline_s,
        placement=Placement(image=image),
        egress=egress,
    )
