"""The simulated model: a biased coin per trial, for planning and for load.

`simulated/coin?p=0.85` passes with probability p. On a pass it replays the case's
`solution` script, so the case's own judges really see the work done; on a fail it gives
up. The coin is seeded from (job seed, case, round, variant), so a rerun reproduces it.
"""

from __future__ import annotations

import hashlib
import math
import random
from collections.abc import Sequence
from urllib.parse import parse_qs, urlsplit

from sandbox.conversation import AssistantTurn, ModelRequest, ProviderError
from sandbox.faux import FauxModel, FauxStep, text

GIVE_UP = "I could not complete this task."


class GiveUpModel:
    """Answers every request, in every step of a case, by giving up."""

    def __init__(self, name: str) -> None:
        self.name = name

    def complete(self, request: ModelRequest) -> AssistantTurn:
        # A fresh one-reply script each time: same usage estimate as any faux answer.
        return FauxModel([text(GIVE_UP)], name=self.name).complete(request)


def parse_coin(model_id: str) -> float:
    """p from `coin?p=0.85`; p defaults to 0.5."""
    parts = urlsplit(model_id)
    if parts.path != "coin":
        raise ProviderError(f"Unknown simulated model {model_id!r}; use simulated/coin?p=0.85.")
    values = parse_qs(parts.query).get("p", ["0.5"])
    try:
        p = float(values[0])
    except ValueError:
        raise ProviderError(f"simulated/coin p={values[0]!r} is not a number.") from None
    if not math.isfinite(p) or not 0.0 <= p <= 1.0:
        raise ProviderError(f"simulated/coin p={values[0]} is outside [0, 1].")
    return p


def coin_draw(seed: int, case_id: str, round_: int, variant: str) -> float:
    key = f"{seed}\x1f{case_id}\x1f{round_}\x1f{variant}".encode()
    return random.Random(hashlib.sha256(key).digest()).random()


def simulated_model(
    model_id: str,
    *,
    solution: Sequence[FauxStep] | None,
    seed: int,
    case_id: str,
    round_: int,
    variant: str,
) -> tuple[FauxModel | GiveUpModel, bool, float]:
    """The model for this trial, whether its coin passed, and the draw."""
    p = parse_coin(model_id)
    draw = coin_draw(seed, case_id, round_, variant)
    passed = draw < p
    name = f"simulated/{model_id}"
    if not passed:
        return GiveUpModel(name), False, draw
    if solution is None:
        raise ProviderError(
            f"Case {case_id} has no 'solution' script, which the simulated model replays "
            "when its coin passes; add scripts={'solution': [...]} to the case."
        )
    return FauxModel(solution, name=name), True, draw
