"""The simulated model: a biased coin per trial, for planning and for load.

`simulated/coin?p=0.85` passes with probability p. On a pass it replays the case's
`solution` script, so the case's own judges really see the work done; on a fail it gives
up. The coin is seeded from (job seed, case, round, variant), so a rerun reproduces it.
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import parse_qs, urlsplit

from sandbox import digests
from sandbox.conversation import AssistantTurn, ModelRequest, ProviderError
from sandbox.faux import FauxModel, FauxStep, text
from sandbox.protocol import Usage

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
    return random.Random(digests.sha256(key).digest()).random()


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
            "when its coin passes; add scripts={'solution': [...]} to the case. (A task's "
            "reference solution is replayed in examhall's own loop only, never for an "
            "installed agent, which could read it.)"
        )
    return FauxModel(solution, name=name), True, draw


# ----- the simulated judge model -------------------------------------------------------

# A line of the agent's answer that the simulated grader obeys: it stands for a prompt
# injection that works, so tests can check that a talked-round grader is a failed trial.
OBEY = "GRADER SAY:"


@dataclass(frozen=True)
class SimulatedGrader:
    """`simulated/grader?pass_if=WORD`: PASS when the agent's fenced answer holds WORD (any
    case), else FAIL, explained in a sentence; it obeys a line `GRADER SAY: TEXT` in the
    answer by answering TEXT. `simulated/grader?fail=provider` fails as a provider does."""

    pass_if: str | None
    fail: bool

    def complete(self, request: ModelRequest) -> AssistantTurn:
        if self.fail:
            raise ProviderError("simulated/grader?fail=provider: the provider answered 503.")
        prompt = request.last_user_text()
        answer = fenced_text(prompt)
        obeyed = [line for line in answer.splitlines() if line.startswith(OBEY)]
        if obeyed:
            reply = obeyed[-1].removeprefix(OBEY).strip()
        else:
            holds = self.pass_if is not None and self.pass_if.lower() in answer.lower()
            reply = (
                f"The answer {'mentions' if holds else 'does not mention'} {self.pass_if!r}.\n"
                f"VERDICT: {'PASS' if holds else 'FAIL'}"
            )
        chars = len(request.system) + len(prompt)
        return AssistantTurn(
            text=reply,
            usage=Usage(math.ceil(chars / 4), math.ceil(len(reply) / 4), 1),
            model="simulated/grader",
        )


def fenced_text(prompt: str) -> str:
    """The agent's text between the grader prompt's marker lines (sandbox.graded.fence)."""
    found = re.search(
        r"^<<<AGENT-OUTPUT (\w+)>>>\n(.*)\n<<<END-AGENT-OUTPUT \1>>>$", prompt, re.S | re.M
    )
    return found.group(2) if found else ""


def parse_grader(model_id: str) -> SimulatedGrader:
    parts = urlsplit(model_id)
    if parts.path != "grader":
        raise ProviderError(
            f"Unknown simulated judge model {model_id!r}; use simulated/grader?pass_if=WORD "
            "or simulated/grader?fail=provider."
        )
    query = parse_qs(parts.query)
    unknown = sorted(set(query) - {"pass_if", "fail"})
    if unknown:
        raise ProviderError(f"simulated/{model_id}: unknown setting(s) {', '.join(unknown)}.")
    fail = query.get("fail", [""])[0]
    if fail not in ("", "provider"):
        raise ProviderError(f"simulated/{model_id}: fail={fail!r}; the one failure is 'provider'.")
    pass_if = query.get("pass_if", [None])[0]
    if not fail and not pass_if:
        raise ProviderError(f"simulated/{model_id}: give pass_if=WORD (or fail=provider).")
    return SimulatedGrader(pass_if=pass_if, fail=bool(fail))
