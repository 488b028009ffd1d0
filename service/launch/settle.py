"""A trial's one outcome, from what its worker said and what its sandbox did.

The integrity rule (docs/reference/statistics.md): only what the control plane saw from outside the
sandbox can make a trial unscored or retried. A worker that reported a result keeps it
unless the deadline passed; a sandbox that ended without one is an `infra_error` only when
nothing the trial controls could have ended it (the root supervisor reports every death of
the sandboxed worker, so a silent end came from outside: the engine, an operator).
"""

from __future__ import annotations

import dataclasses

from sandbox.protocol import ErrorKind, TrialResult
from service.launch.worker_channel import SandboxRun

# The root supervisor's step in which a task's verifier runs (sandbox/supervisor.py).
VERIFY_STEP = "verify"


def _error(kind: ErrorKind, message: str, step: str | None = None) -> TrialResult:
    return TrialResult(outcome="error", error_kind=kind, error_message=message, failed_step=step)


def settle(
    run: SandboxRun,
    collected: TrialResult | None,
    deadline_s: float,
    last_step: str | None = None,
) -> TrialResult:
    if run.infra_error is not None:
        return _error("infra_error", run.infra_error)
    if run.timed_out:
        message = f"The trial passed its {deadline_s:g} s deadline; its sandbox was killed."
        if collected is None:
            return _error("timeout", message)
        return dataclasses.replace(
            collected, outcome="error", error_kind="timeout", error_message=message, score=None
        )
    if run.limit_exceeded is not None:
        # Stopped by the control plane for what the trial did (its egress bytes): a failed
        # run, whatever the worker reported before the stop.
        if collected is None:
            stopped = _error("limit_exceeded", run.limit_exceeded)
            return dataclasses.replace(stopped, limits_hit=["egress_bytes"])
        return dataclasses.replace(
            collected,
            outcome="error",
            error_kind="limit_exceeded",
            error_message=run.limit_exceeded,
            score=None,
            limits_hit=[*collected.limits_hit, "egress_bytes"],
        )
    if collected is not None:
        # A tool killed for memory inside a trial that still finished is the agent's
        # business (it saw the kill); only a worker that died for it ends the trial here.
        return collected
    if run.oom_killed:
        return _error(
            "limit_exceeded", "The trial's sandbox ran out of memory and the worker was killed."
        )
    if last_step == VERIFY_STEP:
        # The verifier runs what the agent left as root: whatever ended the sandbox then
        # was within the agent's reach, so it is a failed run, not one to retry.
        return _error(
            "no_reward",
            f"The sandbox exited with code {run.exit_code} while the verifier ran, before a "
            "reward: a verifier without a reward fails the run.",
            VERIFY_STEP,
        )
    detail = (
        run.channel_error
        or (f"the engine said: {run.engine_error}" if run.engine_error else None)
        or run.stderr_tail.strip()[-2000:]
        or "no output"
    )
    return _error(
        "infra_error", f"The sandbox exited with code {run.exit_code} without a result: {detail}"
    )
