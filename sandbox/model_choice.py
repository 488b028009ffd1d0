"""Choosing the model a trial talks to."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from sandbox.conversation import AssistantTurn, ModelRequest, ProviderError
from sandbox.faux import FauxModel
from sandbox.protocol import ModelRef
from sandbox.suite import Case


class Model(Protocol):
    name: str

    def complete(self, request: ModelRequest) -> AssistantTurn: ...


def resolve_model(
    ref: ModelRef,
    case: Case,
    *,
    seed: int,
    round_: int,
    variant: str,
    remote: Callable[[str], Model] | None = None,
) -> tuple[Model, str]:
    """The model and a line for the transcript saying how it was chosen."""
    if ref.provider == "faux":
        script = case.scripts.get(ref.id)
        if script is None:
            known = ", ".join(sorted(case.scripts)) or "none"
            raise ProviderError(
                f"Case {case.id} has no faux script {ref.id!r}; its scripts: {known}."
            )
        return FauxModel(script, name=str(ref)), f"faux script {ref.id}"
    if ref.provider == "simulated":
        # Only here: its coin's hashing and parsing are no part of a real model's trial.
        from sandbox.simulated import simulated_model

        model, passed, draw = simulated_model(
            ref.id,
            solution=case.scripts.get("solution"),
            seed=seed,
            case_id=case.id,
            round_=round_,
            variant=variant,
        )
        return model, f"coin draw {draw:.6f}: {'pass' if passed else 'fail'}"
    if remote is None:
        raise ProviderError(
            f"Provider {ref.provider!r} needs the control plane's relay, which this run lacks."
        )
    return remote(str(ref)), f"{ref.provider}, reached through the relay or directly"
