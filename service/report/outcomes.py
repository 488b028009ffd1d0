"""What a trial's outcome means for the numbers: the one definition of a scored trial."""

from __future__ import annotations

# Failures of the agent's run count against the task; failures of ours do not score it.
COUNTED_AS_FAILED = frozenset({"agent_error", "provider_error", "timeout", "limit_exceeded"})
NOT_SCORED = frozenset({"infra_error", "sandbox_error", "judge_error"})


def verdict(status: str, outcome: str | None, error_kind: str | None) -> bool | None:
    """True/False for a scored trial, None for one that cannot score the task."""
    if status != "finished":
        return None
    if outcome in ("passed", "failed"):
        return outcome == "passed"
    return False if error_kind in COUNTED_AS_FAILED else None
