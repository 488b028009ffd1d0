"""What a stored trial runs: the run spec the worker gets, built from the trial's row and its
job's spec."""

from __future__ import annotations

import dataclasses
from typing import Any

from sandbox.protocol import Limits, ModelRef, RunSpec, SuiteBundle, TaskSpec
from service.domain.job_spec import Credentials, ModelSpec, VariantSpec
from service.providers import ProviderRegistry


def run_spec(
    *,
    trial_id: str,
    suite: SuiteBundle,
    case_id: str,
    variant: str,
    harness: VariantSpec,
    round_: int = 1,
    seed: int = 0,
    docs: dict[str, str] | None = None,
    credentials: Credentials = "relay",
    providers: ProviderRegistry,
    task: TaskSpec | None = None,
    agent_timeout_s: float | None = None,
    judge_model: ModelSpec | None = None,
) -> RunSpec:
    """The worker's spec for one trial of `variant`, run as `harness` says; `docs` is the
    job's bundle (put in the prompt only when the harness asks for it). A task suite's trial
    carries its `task`, and the task's own agent timeout."""
    timeout_s = agent_timeout_s or harness.limits.timeout_s
    return RunSpec(
        trial_id=trial_id,
        suite=suite,
        case_id=case_id,
        model=ModelRef(provider=harness.model.provider, id=harness.model.id),
        variant=variant,
        round=round_,
        seed=seed,
        tools=tuple(harness.tools) if harness.tools is not None else None,
        limits=Limits(max_turns=harness.limits.max_turns, agent_timeout_s=timeout_s),
        command=tuple(harness.command) if harness.command else None,
        docs=docs if harness.docs else None,
        rules=harness.rules,
        task=task,
        judge_model=ModelRef(judge_model.provider, judge_model.id) if judge_model else None,
        **(_direct(harness, providers) if credentials == "direct" else {}),
    )


def _direct(harness: VariantSpec, providers: ProviderRegistry) -> dict[str, Any]:
    """Direct credentials: the provider's wire settings and key go into the run spec."""
    entry = providers.get(harness.model.provider)
    if entry is None:
        return {}  # faux and simulated answer inside the sandbox
    price = entry.prices.get(harness.model.id)
    return {
        "provider": {
            "kind": entry.kind,
            "base_url": entry.base_url,
            "headers": entry.headers,
            "max_tokens": entry.max_tokens,
            "price": dataclasses.asdict(price) if price else None,
        },
        "credentials": {"api_key": entry.key() or ""},
        "budget": harness.budget(),
    }
