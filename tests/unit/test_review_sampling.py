"""The review queue's sample (service/review/sampling.py): reproducible from its seed,
stratified as its docstring says, and recomputable from that text alone."""

from __future__ import annotations

import hashlib
import math
import random

import pytest

from service.domain.outcomes import COUNTED_AS_FAILED, NOT_SCORED
from service.review.sampling import Candidate, allocate, draw, sampled_outcome


def _job(cases: int = 30, rounds: int = 3, seed: int = 5) -> list[Candidate]:
    """Two arms, outcomes drawn unevenly: with_docs passes more often."""
    rng = random.Random(seed)
    found: list[Candidate] = []
    order = 0
    for case in range(cases):
        for round_ in range(1, rounds + 1):
            for variant, p in (("without_docs", 0.3), ("with_docs", 0.8)):
                outcome = "passed" if rng.random() < p else "failed"
                found.append(
                    Candidate(f"t{order}", variant, f"case-{case}", round_, order, outcome)
                )
                order += 1
    return found


def _recomputed(candidates: list[Candidate], size: int, seed: int) -> list[str]:
    """The documented algorithm, written again from the docstring's words: float
    priorities in a plain loop, strata as sorted (variant, outcome)."""
    strata: dict[tuple[str, str], list[Candidate]] = {}
    for c in candidates:
        strata.setdefault((c.variant, c.outcome), []).append(c)
    keys = sorted(strata)
    places = dict.fromkeys(keys, 0)
    for _ in range(min(size, len(candidates))):
        open_ = [k for k in keys if places[k] < len(strata[k])]

        def priority(k: tuple[str, str]) -> tuple[float, int, int]:
            n, total = places[k], len(strata[k])
            return (math.inf if n == 0 else total / math.sqrt(n * (n + 1)), total, -keys.index(k))

        places[max(open_, key=priority)] += 1
    chosen: list[Candidate] = []
    for k in keys:
        ranked = sorted(
            strata[k],
            key=lambda c: hashlib.sha256(f"{seed}/{c.round}/{c.case_id}".encode()).hexdigest(),
        )
        chosen += ranked[: places[k]]
    return [c.trial_id for c in sorted(chosen, key=lambda c: c.order)]


def test_the_same_seed_gives_the_same_sample_and_another_seed_another() -> None:
    job = _job()
    first = draw(job, 20, seed=11)
    assert draw(list(reversed(job)), 20, seed=11) == first  # the input's order is irrelevant
    assert [c.trial_id for c in draw(job, 20, seed=12)] != [c.trial_id for c in first]
    assert len(first) == 20 and len({c.trial_id for c in first}) == 20


@pytest.mark.parametrize(("size", "seed"), [(1, 0), (4, 3), (20, 11), (77, 2**32 - 1), (500, 9)])
def test_the_sample_is_recomputable_from_the_documented_algorithm(size: int, seed: int) -> None:
    job = _job()
    assert [c.trial_id for c in draw(job, size, seed)] == _recomputed(job, size, seed)


def test_strata_each_get_a_place_and_the_rest_goes_by_size() -> None:
    # Huntington-Hill by hand: one each, then 10/sqrt(2) > 3/sqrt(2), then 10/sqrt(6) > 3/sqrt(2).
    assert allocate([10, 3, 1], 5) == [3, 1, 1]
    assert allocate([10, 3, 1], 2) == [1, 1, 0]  # fewer places than strata: the larger first
    assert allocate([2, 2], 9) == [2, 2]  # never more than a stratum has
    job = _job()
    sample = draw(job, 12, seed=1)
    strata = {(c.variant, c.outcome) for c in job}
    assert {(c.variant, c.outcome) for c in sample} == strata
    assert all(c.outcome in ("passed", "failed") for c in sample)


def test_a_larger_sample_with_the_same_seed_contains_the_smaller() -> None:
    job = _job()
    previous: set[str] = set()
    for size in range(1, len(job) + 1, 7):
        drawn = {c.trial_id for c in draw(job, size, seed=42)}
        assert previous <= drawn and len(drawn) == size
        previous = drawn


def test_the_arms_of_a_pair_rank_alike() -> None:
    """The key leaves the variant out, so the arms of a (case, round) come up together far
    more often than two independent draws would give."""
    job = _job(cases=60, rounds=2)
    sample = draw(job, 60, seed=3)
    keys = [(c.case_id, c.round) for c in sample]
    pairs = len(keys) - len(set(keys))
    assert pairs >= 10, pairs


def test_an_unscored_trial_cannot_be_drawn() -> None:
    with pytest.raises(ValueError, match="not scored"):
        draw([Candidate("t1", "v", "c", 1, 0, "judge_error")], 1, seed=0)


@pytest.mark.parametrize("kind", sorted(COUNTED_AS_FAILED | NOT_SCORED))
def test_scored_errors_are_one_stratum_and_unscored_ones_are_left_out(kind: str) -> None:
    outcome = sampled_outcome("error", kind)
    assert outcome == ("error" if kind in COUNTED_AS_FAILED else None)
    assert sampled_outcome("passed", None) == "passed" and sampled_outcome(None, None) is None
    if outcome is not None:
        # A variant's one scored error gets a place before a second pass or fail does.
        job = [
            *(Candidate(f"p{i}", "v", f"c{i}", 1, i, "passed") for i in range(5)),
            Candidate("e", "v", "c9", 1, 9, outcome),
        ]
        assert "e" in [c.trial_id for c in draw(job, 2, seed=1)]
