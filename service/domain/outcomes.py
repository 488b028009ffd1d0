"""What a trial's outcome means for the numbers: the one definition of a scored trial."""

from __future__ import annotations

from service.domain.status import BUILD_ERROR, Outcome, TrialStatus

# Failures of the agent's run count against the task; failures of ours do not score it.
COUNTED_AS_FAILED = frozenset(
    {"agent_error", "provider_error", "timeout", "limit_exceeded", "no_reward"}
)
NOT_SCORED = frozenset({"infra_error", "sandbox_error", "judge_error", BUILD_ERROR})

# Looked up once: `verdict` runs for every trial, and reading a member off its enum class
# costs several times the comparison.
_FINISHED = TrialStatus.FINISHED
_PASSED = Outcome.PASSED
_SCORED_OUTCOMES = frozenset({Outcome.PASSED, Outcome.FAILED})


def verdict(status: str, outcome: str | None, error_kind: str | None) -> bool | None:
    """True/False for a scored trial, None for one that cannot score the task."""
    if status != _FINISHED:
        return None
    if outcome in _SCORED_OUTCOMES:
        return outcome == _PASSED
    return False if error_kind in COUNTED_AS_FAILED else None
