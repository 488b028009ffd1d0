"""The review queue's sample: seeded, stratified by variant and outcome, reproducible.

The algorithm (version 2), in full, so that anyone can recompute a sample from the job's
trials (`GET /v1/jobs/{id}/trials`) and the sample's size and seed:

1. The population is each planned trial's final attempt that is scored: its outcome is
   `passed` or `failed`, or `error` with an error kind the report counts as a fail
   (`agent_error`, `provider_error`, `timeout`, `limit_exceeded`, `no_reward`:
   service/domain/outcomes.py). Errors that are not scored (`infra_error`, `sandbox_error`,
   `judge_error`, `build_error`) and unfinished trials are left out: a person cannot check a
   verdict that was never given.
2. A stratum is a (variant, outcome) pair, the outcome as the trial lists it (so a variant's
   scored errors are one stratum, `error`); strata are ordered by variant, then outcome, as
   strings.
3. The size is handed out one place at a time (the Huntington-Hill divisor method): each
   place goes to the stratum with the highest priority N / sqrt(n (n + 1)) among those not
   yet exhausted (N its trials, n its places so far; a stratum without a place comes first),
   ties to the larger N, then the earlier stratum. So every stratum gets one place before any
   gets a second, the rest is nearly proportional to the strata's sizes, and a larger size
   never takes a place away from a stratum: with the same seed, a larger sample contains
   the smaller one.
4. Within a stratum the trials are ranked by the lowercase hex SHA-256 of the UTF-8 text
   "{seed}/{round}/{case_id}" (ties, which need a SHA-256 collision, by plan order), and
   the stratum's first n are taken. The key leaves out the variant, so the arms of one
   (case, round) rank alike and are often drawn together: the pairs a docs-lift check needs.
5. The sample is listed in plan order.

Version 1 (samples drawn before scored errors could be reviewed) was the same with passed
and failed trials only.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

from service.domain.outcomes import COUNTED_AS_FAILED

ALGORITHM = 2
SCORED = ("passed", "failed")
STRATA_OUTCOMES = (*SCORED, "error")


def sampled_outcome(outcome: str | None, error_kind: str | None) -> str | None:
    """The outcome a trial is stratified by (step 1): passed, failed, or error for a scored
    error; None for a trial that is not in the population."""
    if outcome in SCORED:
        return outcome
    if outcome == "error" and error_kind in COUNTED_AS_FAILED:
        return "error"
    return None


@dataclass(frozen=True)
class Candidate:
    """A scored trial (a planned trial's final attempt) that may be drawn; `outcome` is
    `sampled_outcome`'s."""

    trial_id: str
    variant: str
    case_id: str
    round: int
    order: int
    outcome: str


def rank_key(seed: int, round_: int, case_id: str) -> str:
    return hashlib.sha256(f"{seed}/{round_}/{case_id}".encode()).hexdigest()


def allocate(sizes: Sequence[int], size: int) -> list[int]:
    """Places per stratum for strata of these sizes (step 3)."""
    taken = [0] * len(sizes)
    for _ in range(min(size, sum(sizes))):
        best: int | None = None
        for index, total in enumerate(sizes):
            if taken[index] >= total:
                continue
            if best is None or _before(sizes, taken, index, best):
                best = index
        assert best is not None  # fewer places than trials, so some stratum has room
        taken[best] += 1
    return taken


def _before(sizes: Sequence[int], taken: Sequence[int], a: int, b: int) -> bool:
    """Whether stratum `a` has a higher priority than the earlier stratum `b`. Compared in
    integers (N_a^2 n_b(n_b+1) against N_b^2 n_a(n_a+1)), so no rounding decides a place."""
    left = sizes[a] ** 2 * taken[b] * (taken[b] + 1)
    right = sizes[b] ** 2 * taken[a] * (taken[a] + 1)
    if left != right:
        return left > right
    return sizes[a] > sizes[b]


def draw(candidates: Sequence[Candidate], size: int, seed: int) -> list[Candidate]:
    """The sample of `size` (all of them when there are fewer), in plan order."""
    strata: dict[tuple[str, str], list[Candidate]] = {}
    for candidate in candidates:
        if candidate.outcome not in STRATA_OUTCOMES:
            raise ValueError(f"trial {candidate.trial_id} is not scored ({candidate.outcome})")
        strata.setdefault((candidate.variant, candidate.outcome), []).append(candidate)
    keys = sorted(strata)
    places = allocate([len(strata[key]) for key in keys], size)
    drawn: list[Candidate] = []
    for key, n in zip(keys, places, strict=True):
        ranked = sorted(strata[key], key=lambda c: (rank_key(seed, c.round, c.case_id), c.order))
        drawn += ranked[:n]
    return sorted(drawn, key=lambda c: (c.order, c.variant))
