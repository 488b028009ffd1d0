"""The paired comparison: pairing and blocking; its statistics against independent references."""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
import random
import statistics
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import pytest
import scipy.optimize  # type: ignore[import-untyped]  # no stubs; tests only
import scipy.stats  # type: ignore[import-untyped]

from service.domain.outcomes import COUNTED_AS_FAILED, NOT_SCORED
from service.domain.planner import plan
from service.report.model import Comparison
from service.report.paired import (
    BLOCKS_PAIRS,
    ArmTrial,
    compare,
    mcnemar_midp,
    minimum_detectable_effect,
)
from service.report.render_text import comparison_lines

BASE, CAND = "without_docs", "with_docs"

# (case, round) -> (baseline passed, candidate passed)
Outcomes = Callable[[str, int], tuple[bool, bool]]


def design(cases: list[str], rounds: int, outcomes: Outcomes, **telemetry: Any) -> list[ArmTrial]:
    """Finished trials in the service's planned order (baseline first in odd rounds)."""
    trials = []
    for planned in plan(cases, rounds, (BASE, CAND)):
        base_passed, cand_passed = outcomes(planned.case_id, planned.round)
        passed = base_passed if planned.variant == BASE else cand_passed
        trials.append(
            ArmTrial(
                case_id=planned.case_id,
                round=planned.round,
                variant=planned.variant,
                order=planned.order,
                status="finished",
                outcome="passed" if passed else "failed",
                error_kind=None,
                **telemetry,
            )
        )
    return trials


def design_of(
    table: dict[tuple[str, int], tuple[bool, bool]], cases: list[str], rounds: int
) -> list[ArmTrial]:
    return design(cases, rounds, lambda c, r: table[(c, r)])


def run(trials: list[ArmTrial], cases: list[str], rounds: int, **kw: Any) -> dict[str, Any]:
    """The comparison as the report's JSON has it."""
    options: dict[str, Any] = {"k": 2, "seed": 7, "resamples": 200} | kw
    result = compare(trials, baseline=BASE, candidate=CAND, cases=cases, rounds=rounds, **options)
    dumped = result.model_dump(mode="json")
    json.dumps(dumped, allow_nan=False)  # JSON-ready: raises on NaN or infinity anywhere
    assert Comparison.model_validate(dumped) == result  # and it reads back as it was
    return dumped


def render_comparison_text(result: dict[str, Any]) -> list[str]:
    return comparison_lines(Comparison.model_validate(result))


def replace(
    trials: list[ArmTrial], case: str, round_: int, variant: str, **changes: Any
) -> list[ArmTrial]:
    return [
        dataclasses.replace(t, **changes)
        if (t.case_id, t.round, t.variant) == (case, round_, variant)
        else t
        for t in trials
    ]


def drop(trials: list[ArmTrial], case: str, round_: int, variant: str) -> list[ArmTrial]:
    return [t for t in trials if (t.case_id, t.round, t.variant) != (case, round_, variant)]


CASES = ["a", "b", "c"]
# a: candidate wins both rounds; b: tie (both pass) then a loss; c: ties (both fail).
KNOWN: dict[tuple[str, int], tuple[bool, bool]] = {
    ("a", 1): (False, True),
    ("a", 2): (False, True),
    ("b", 1): (True, True),
    ("b", 2): (True, False),
    ("c", 1): (False, False),
    ("c", 2): (False, False),
}


def known(case: str, round_: int) -> tuple[bool, bool]:
    return KNOWN[(case, round_)]


# --- pairing and blocking ----------------------------------------------------------------


def test_complete_design_publishes() -> None:
    result = run(design(CASES, 2, known), CASES, 2)
    assert result["baseline"] == BASE and result["candidate"] == CAND
    assert result["pairs_total"] == result["pairs_eligible"] == 6
    assert result["blocked"] == [] and result["withheld_reason"] is None
    head = result["headline"]
    assert head["baseline_pass_rate"] == 2 / 6
    assert head["candidate_pass_rate"] == 3 / 6
    assert head["lift_pp"] == pytest.approx(100 / 6)
    assert (head["wins"], head["ties"], head["losses"]) == (2, 3, 1)
    low, high = head["lift_ci95_pp"]
    assert low <= head["lift_pp"] <= high
    assert head["mcnemar_midp"] == mcnemar_midp(2, 1)
    assert head["mde_pp"] > 0


def test_missing_trial_blocks_the_pair_and_withholds_the_headline() -> None:
    trials = drop(design(CASES, 2, known), "b", 2, CAND)
    result = run(trials, CASES, 2)
    assert result["blocked"] == [
        {"case": "b", "round": 2, "reasons": ["with_docs: missing (no trial)"]}
    ]
    assert result["pairs_eligible"] == 5
    assert result["headline"] is None
    assert result["withheld_reason"] == "withheld because 1 pair is blocked"


def test_duplicated_trial_blocks() -> None:
    trials = design(CASES, 2, known)
    extra = dataclasses.replace(
        next(t for t in trials if (t.case_id, t.round, t.variant) == ("a", 1, BASE)), order=99
    )
    result = run([*trials, extra], CASES, 2)
    assert result["blocked"] == [
        {"case": "a", "round": 1, "reasons": ["without_docs: duplicated (expected 1 run, found 2)"]}
    ]
    assert result["headline"] is None


@pytest.mark.parametrize("kind", sorted(NOT_SCORED))
def test_our_errors_block_with_their_kind(kind: str) -> None:
    trials = replace(design(CASES, 2, known), "c", 1, CAND, outcome="error", error_kind=kind)
    result = run(trials, CASES, 2)
    assert result["blocked"] == [
        {"case": "c", "round": 1, "reasons": [f"with_docs: errored ({kind})"]}
    ]
    assert result["withheld_reason"] == "withheld because 1 pair is blocked"


@pytest.mark.parametrize("status", ["queued", "running"])
def test_unfinished_trials_block_as_unscored(status: str) -> None:
    trials = replace(design(CASES, 2, known), "a", 2, BASE, status=status, outcome=None)
    result = run(trials, CASES, 2)
    assert result["blocked"][0]["reasons"] == [f"without_docs: unscored ({status})"]


def test_provider_error_blocks_the_pair() -> None:
    # Counted as a failure in single-arm rates, but in a comparison it says little about
    # the arm (rate limits hit the longer prompt more often), so it blocks.
    trials = replace(
        design(CASES, 2, known), "a", 1, CAND, outcome="error", error_kind="provider_error"
    )
    result = run(trials, CASES, 2)
    assert result["blocked"] == [
        {"case": "a", "round": 1, "reasons": ["with_docs: errored (provider_error)"]}
    ]
    assert result["headline"] is None


@pytest.mark.parametrize("kind", sorted(COUNTED_AS_FAILED - BLOCKS_PAIRS))
def test_agent_side_errors_are_scored_as_failures_and_do_not_block(kind: str) -> None:
    # The candidate passed a1; make it an agent error instead: a1 becomes a tie (both fail).
    trials = replace(design(CASES, 2, known), "a", 1, CAND, outcome="error", error_kind=kind)
    result = run(trials, CASES, 2)
    assert result["blocked"] == [] and result["pairs_eligible"] == 6
    head = result["headline"]
    assert head["candidate_pass_rate"] == 2 / 6
    assert (head["wins"], head["ties"], head["losses"]) == (1, 4, 1)


def test_several_blocked_pairs_both_sides_reasons_and_plural_text() -> None:
    trials = design(CASES, 2, known)
    trials = drop(trials, "a", 1, BASE)
    trials = drop(trials, "a", 1, CAND)
    trials = replace(trials, "b", 1, BASE, outcome="error", error_kind="infra_error")
    trials = replace(trials, "b", 1, CAND, status="queued", outcome=None)
    trials = replace(trials, "c", 2, CAND, outcome="error", error_kind="sandbox_error")
    result = run(trials, CASES, 2)
    assert result["blocked"] == [
        {
            "case": "a",
            "round": 1,
            "reasons": ["without_docs: missing (no trial)", "with_docs: missing (no trial)"],
        },
        {
            "case": "b",
            "round": 1,
            "reasons": ["without_docs: errored (infra_error)", "with_docs: unscored (queued)"],
        },
        {"case": "c", "round": 2, "reasons": ["with_docs: errored (sandbox_error)"]},
    ]
    assert result["pairs_eligible"] == 3
    assert result["withheld_reason"] == "withheld because 3 pairs are blocked"
    lines = render_comparison_text(result)
    assert "Pass rate withheld because 3 pairs are blocked" in lines
    at = lines.index("Blocked pairs:")
    assert lines[at + 1 :] == [
        "  a round 1: without_docs: missing (no trial); with_docs: missing (no trial)",
        "  b round 1: without_docs: errored (infra_error); with_docs: unscored (queued)",
        "  c round 2: with_docs: errored (sandbox_error)",
    ]


def test_trials_outside_the_design_are_ignored() -> None:
    trials = design(CASES, 2, known)
    stray = [
        dataclasses.replace(trials[0], variant="other", order=100),
        dataclasses.replace(trials[0], case_id="zzz", order=101),
        dataclasses.replace(trials[0], round=3, order=102),
    ]
    assert run(trials + stray, CASES, 2) == run(trials, CASES, 2)


def test_no_pairs_withholds_with_a_reason() -> None:
    result = run([], [], 2)
    assert result["pairs_total"] == 0 and result["headline"] is None
    assert result["withheld_reason"] == "withheld because the design has no pairs"


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"candidate": BASE}, "must differ"),
        ({"cases": ["a", "a"]}, "must not repeat"),
        ({"rounds": -1}, "rounds"),
        ({"rounds": True}, "rounds"),
        ({"k": 0}, "k must"),
        ({"seed": 1.5}, "seed"),
        ({"resamples": 0}, "resamples"),
    ],
)
def test_bad_arguments_are_refused(kw: dict[str, Any], message: str) -> None:
    args: dict[str, Any] = {
        "baseline": BASE,
        "candidate": CAND,
        "cases": ["a"],
        "rounds": 1,
        "k": 1,
        "seed": 0,
    } | kw
    with pytest.raises(ValueError, match=message):
        compare([], **args)


# --- McNemar mid-p -----------------------------------------------------------------------


def midp_by_enumeration(wins: int, losses: int) -> Fraction:
    """The definition: P(a table more extreme than observed) + P(one as extreme) / 2.

    Under H0 each discordant pair is a win with probability 1/2; extremeness is the distance
    of the win count from n/2. When wins = losses the brief fixes the mid-p at 1.
    """
    n = wins + losses
    if n == 0 or wins == losses:
        return Fraction(1)
    observed = abs(wins - Fraction(n, 2))
    more = equal = Fraction(0)
    for x in range(n + 1):
        prob = Fraction(math.comb(n, x), 2**n)
        if abs(x - Fraction(n, 2)) > observed:
            more += prob
        elif abs(x - Fraction(n, 2)) == observed:
            equal += prob
    return more + equal / 2


def test_mcnemar_midp_against_enumeration() -> None:
    for wins, losses in itertools.product(range(16), repeat=2):
        assert mcnemar_midp(wins, losses) == float(midp_by_enumeration(wins, losses)), (
            wins,
            losses,
        )


def test_mcnemar_midp_against_scipy() -> None:
    for wins, losses in itertools.product(range(0, 121, 3), range(0, 121, 4)):
        n, m = wins + losses, min(wins, losses)
        if n == 0 or 2 * m == n:
            expected = 1.0
        else:
            # scipy's exact two-sided binomial test is 2 P(X <= m); the mid-p takes off half
            # the observed table's probability on each side, P(X = m) in all.
            exact = scipy.stats.binomtest(m, n, 0.5).pvalue
            expected = exact - scipy.stats.binom.pmf(m, n, 0.5)
        assert mcnemar_midp(wins, losses) == pytest.approx(expected, rel=1e-9, abs=1e-300)
        assert 0 < mcnemar_midp(wins, losses) <= 1


def test_mcnemar_midp_is_symmetric_and_refuses_bad_counts() -> None:
    assert mcnemar_midp(3, 11) == mcnemar_midp(11, 3)
    assert mcnemar_midp(0, 0) == 1.0
    # One discordant pair: mid-p = 2 (0 + 1/2 * 1/2) = 1/2.
    assert mcnemar_midp(1, 0) == 0.5
    with pytest.raises(ValueError):
        mcnemar_midp(-1, 2)
    with pytest.raises(ValueError):
        mcnemar_midp(True, 2)


# --- minimum detectable effect -----------------------------------------------------------

Z_975 = scipy.stats.norm.ppf(0.975)
Z_80 = scipy.stats.norm.ppf(0.80)


def exact_two_sided_mde(stderr: float) -> float:
    """The delta where the two-sided 0.05 Wald test has exactly 80% power, both tails counted."""

    def power(delta: float) -> float:
        return float(
            scipy.stats.norm.cdf(delta / stderr - Z_975)
            + scipy.stats.norm.cdf(-delta / stderr - Z_975)
        )

    return float(scipy.optimize.brentq(lambda d: power(d) - 0.8, 0.0, 10 * stderr, xtol=1e-14))


@pytest.mark.parametrize("seed", range(20))
def test_mde_against_the_exact_power_equation(seed: int) -> None:
    rng = random.Random(seed)
    cases = [f"case-{i}" for i in range(rng.randint(3, 30))]
    rounds = rng.randint(1, 4)
    rates = {c: (rng.random(), rng.random()) for c in cases}
    outcomes = {
        (c, r): (rng.random() < rates[c][0], rng.random() < rates[c][1])
        for c in cases
        for r in range(1, rounds + 1)
    }
    result = run(design(cases, rounds, lambda c, r: outcomes[(c, r)]), cases, rounds)
    diffs = [
        sum(int(outcomes[(c, r)][1]) - int(outcomes[(c, r)][0]) for r in range(1, rounds + 1))
        / rounds
        for c in cases
    ]
    # Independent: the sample SD of the per-case differences over sqrt(N), then scipy's root.
    stderr = statistics.stdev(diffs) / math.sqrt(len(diffs))
    if stderr == 0:
        pytest.skip("this draw has no spread; the fallback is tested separately")
    # Tolerance: the formula leaves out the opposite tail, Phi(-4.76) ~ 1e-6 of power, which
    # moves delta by ~1e-6 / phi(0.84) SE, a relative 4e-6.
    assert result["headline"]["mde_pp"] == pytest.approx(
        100 * exact_two_sided_mde(stderr), rel=1e-5
    )


@pytest.mark.parametrize(("cases", "rounds"), [(2, 1), (10, 2), (40, 3)])
@pytest.mark.parametrize("every_pair", ["tie", "win", "win-or-tie"])
def test_mde_fallback_when_the_observed_se_is_zero(
    cases: int, rounds: int, every_pair: str
) -> None:
    # Every case has the same difference, so the observed SE is 0 and says nothing about the
    # noise; the MDE falls back to SE <= sqrt(p_disc / N), p_disc at its Wilson upper end.
    names = [f"c{i}" for i in range(cases)]

    def outcome(case: str, round_: int) -> tuple[bool, bool]:
        if every_pair == "tie":
            return True, True
        if every_pair == "win":
            return False, True
        # In every case, round 1 a win and the rest ties: d_i = 1/R for all i.
        return round_ != 1, True

    result = run(design(names, rounds, outcome), names, rounds)
    pairs = cases * rounds
    discordant = {"tie": 0, "win": pairs, "win-or-tie": cases}[every_pair]
    # scipy's Wilson interval (no continuity correction) for the discordant share of pairs.
    ci = scipy.stats.binomtest(discordant, pairs).proportion_ci(0.95, method="wilson")
    # Capped at 100 pp: a lift cannot be larger, so a larger MDE only says "undetectable".
    expected = min(1.0, (Z_975 + Z_80) * math.sqrt(ci.high / cases))
    assert result["headline"]["mde_pp"] == pytest.approx(100 * expected, rel=1e-9)


def test_mde_needs_two_cases() -> None:
    assert minimum_detectable_effect([0.5], discordant=1, pairs=2) is None
    result = run(design(["a"], 2, known), ["a"], 2)
    assert result["headline"]["mde_pp"] is None and result["headline"]["mde_reason"]
    assert result["headline"]["lift_ci95_pp"] is None and result["headline"]["lift_ci95_reason"]


def test_mde_gives_80_percent_power_in_simulation() -> None:
    """Designs whose true lift is the population MDE are detected about 80% of the time.

    Population: 40 cases x 2 rounds, baseline rate p_i ~ U(0.2, 0.6), candidate p_i + delta,
    independent trials. Then Var(d_i) = (E[p(1-p)] + E[q(1-q)]) / R exactly, and the MDE
    solves delta = 2.8016 sqrt(Var(d_i) / N) (fixed point: Var depends on delta).
    """
    n_cases, rounds, lo, hi = 40, 2, 0.2, 0.6
    mean_p = (lo + hi) / 2
    mean_p2 = (hi - lo) ** 2 / 12 + mean_p**2
    delta = 0.2
    for _ in range(100):
        var_b = mean_p - mean_p2
        var_c = (mean_p + delta) - (mean_p2 + 2 * delta * mean_p + delta**2)
        delta = (Z_975 + Z_80) * math.sqrt((var_b + var_c) / rounds / n_cases)
    rng = random.Random(2024)
    names = [f"c{i}" for i in range(n_cases)]
    detected, mdes, designs = 0, [], 1000
    for seed in range(designs):
        rates = {c: rng.uniform(lo, hi) for c in names}
        outcomes = {
            (c, r): (rng.random() < rates[c], rng.random() < rates[c] + delta)
            for c in names
            for r in (1, 2)
        }
        head = run(
            design_of(outcomes, names, rounds),
            names,
            rounds,
            seed=seed,
            resamples=1,
        )["headline"]
        mde = head["mde_pp"]
        mdes.append(mde)
        # The MDE's test: |lift| beyond z_.975 standard errors, SE = MDE / 2.8016.
        detected += abs(head["lift_pp"]) > Z_975 * mde / (Z_975 + Z_80)
    # 1000 designs: SE of the power estimate ~ sqrt(0.8 * 0.2 / 1000) = 1.3 pp; the band is
    # about +-4 SE, allowing for the estimated (not known) SE at N = 40.
    assert 0.75 <= detected / designs <= 0.85
    assert statistics.median(mdes) == pytest.approx(100 * delta, rel=0.05)


# --- bootstrap interval ------------------------------------------------------------------


@pytest.mark.parametrize("method", [1, 2])
def test_bootstrap_lift_interval_covers_a_known_lift(method: int) -> None:
    """Over 300 simulated designs (40 cases x 2 rounds) with true lift 15 pp, ~95% coverage.

    Cases differ in difficulty (p_i ~ U(0.1, 0.7)) and in their own lift (0.15 + U(-0.1,
    0.1), mean 0.15 exactly, q_i within [0.15, 0.95]), and half the pairs share one draw for
    both arms (correlated), so the case really is the cluster. The SE of a coverage estimate
    over 300 designs is sqrt(0.95 * 0.05 / 300) ~ 1.3 pp; a percentile bootstrap with 40
    cases runs a little under nominal (its variance is biased by (N-1)/N), so 0.90-0.99 is
    about -4 and +3 SE around 0.95. 500 resamples keep it to a few seconds.
    """
    rng = random.Random(99)
    names = [f"c{i:02d}" for i in range(40)]
    true_lift_pp, covered, designs = 15.0, 0, 300
    for seed in range(designs):
        outcomes: dict[tuple[str, int], tuple[bool, bool]] = {}
        for c in names:
            p = rng.uniform(0.1, 0.7)
            q = p + 0.15 + rng.uniform(-0.1, 0.1)
            for r in (1, 2):
                if rng.random() < 0.5:
                    u = rng.random()
                    outcomes[(c, r)] = (u < p, u < q)
                else:
                    outcomes[(c, r)] = (rng.random() < p, rng.random() < q)
        head = run(
            design_of(outcomes, names, 2), names, 2, seed=seed, resamples=500, method=method
        )["headline"]
        low, high = head["lift_ci95_pp"]
        covered += low <= true_lift_pp <= high
    assert 0.90 <= covered / designs <= 0.99


@pytest.mark.parametrize("method", [1, 2])
def test_lift_interval_covers_at_the_demo_size(method: int) -> None:
    """7 cases x 2 rounds, the docs-lift demo's size, true lift 20 pp: a plain percentile
    bootstrap covered about 87% here; the expanded one must reach the nominal band. 300
    designs: coverage SE ~1.3 pp, band 0.91-0.99."""
    rng = random.Random(7)
    names = [f"c{i}" for i in range(7)]
    covered, designs = 0, 300
    for seed in range(designs):
        outcomes: dict[tuple[str, int], tuple[bool, bool]] = {}
        for c in names:
            p = rng.uniform(0.1, 0.6)
            q = p + 0.2 + rng.uniform(-0.1, 0.1)
            for r in (1, 2):
                outcomes[(c, r)] = (rng.random() < p, rng.random() < q)
        head = run(
            design_of(outcomes, names, 2), names, 2, seed=seed, resamples=500, method=method
        )["headline"]
        if head["lift_ci95_pp"] is None:
            continue
        low, high = head["lift_ci95_pp"]
        covered += low <= 20.0 <= high
    assert 0.91 <= covered / designs <= 0.99


def test_same_lift_in_every_case_is_not_a_point_interval() -> None:
    result = run(design(CASES, 2, lambda c, r: (False, True)), CASES, 2)
    head = result["headline"]
    assert head["lift_pp"] == 100.0
    low, high = head["lift_ci95_pp"]
    assert high == 100.0 and 0.0 < low < 100.0  # six pairs cannot pin the lift at 100
    assert head["lift_ci95_method"].startswith("Wilson bounds")


@pytest.mark.parametrize("method", [1, 2])
def test_bootstrap_is_seeded_and_ignores_input_order(method: int) -> None:
    names = [f"c{i}" for i in range(12)]
    rng = random.Random(3)
    outcomes = {(c, r): (rng.random() < 0.4, rng.random() < 0.6) for c in names for r in (1, 2)}
    trials = design(names, 2, lambda c, r: outcomes[(c, r)])
    first = run(trials, names, 2, seed=5, method=method)["headline"]["lift_ci95_pp"]
    shuffled = trials[:]
    random.Random(1).shuffle(shuffled)
    again = run(shuffled, list(reversed(names)), 2, seed=5, method=method)
    assert again["headline"]["lift_ci95_pp"] == first
    assert run(trials, names, 2, seed=6, method=method)["headline"]["lift_ci95_pp"] != first


# --- pass^k ------------------------------------------------------------------------------


def test_pass_hat_k_per_arm_when_rounds_reach_k() -> None:
    head = run(design(CASES, 2, known), CASES, 2, k=2)["headline"]
    # Cases passing both rounds: baseline only b (1 of 3), candidate only a (1 of 3).
    assert head["pass_hat_k"] == {"baseline": 1 / 3, "candidate": 1 / 3}
    assert head["pass_hat_k_reason"] is None


def test_pass_hat_k_is_none_with_a_reason_when_rounds_are_short() -> None:
    one = {("a", 1): (True, True), ("b", 1): (False, True)}
    head = run(design(["a", "b"], 1, lambda c, r: one[(c, r)]), ["a", "b"], 1, k=2)["headline"]
    assert head["pass_hat_k"] == {"baseline": None, "candidate": None}
    assert "one repetition cannot establish stability" in head["pass_hat_k_reason"]
    head = run(design(CASES, 2, known), CASES, 2, k=3)["headline"]
    assert head["pass_hat_k"] == {"baseline": None, "candidate": None}
    assert head["pass_hat_k_reason"] == "pass^3 needs at least 3 rounds per case; this design has 2"


# --- flags -------------------------------------------------------------------------------


def flags_for(outcome: Callable[[str, int], tuple[bool, bool]], rounds: int = 2) -> list[str]:
    return list(run(design(CASES, rounds, outcome), CASES, rounds)["flags"])


def test_flags() -> None:
    assert flags_for(lambda c, r: (False, c != "c")) == []
    assert flags_for(lambda c, r: (False, True)) == ["treatment-saturated"]
    assert flags_for(lambda c, r: (True, True)) == [
        "control-saturated",
        "no-lift",
        "treatment-saturated",
    ]
    assert flags_for(lambda c, r: (True, False)) == ["control-saturated", "negative-delta"]
    assert flags_for(lambda c, r: (False, r == 1)) == ["flaky"]
    assert flags_for(lambda c, r: (c == "a", c == "b")) == ["no-lift"]
    result = run(design(CASES, 2, known), CASES, 2)
    assert result["flags"] == ["flaky"]
    assert result["flaky_cases"] == {"baseline": [], "candidate": ["b"]}


def test_withheld_headline_keeps_only_the_flaky_flag() -> None:
    # Verdict flags (negative-delta, saturated) would read as a conclusion the design
    # cannot support; flaky is a fact about single cases and stays.
    trials = drop(design(CASES, 2, lambda c, r: (True, r == 1)), "c", 2, BASE)
    result = run(trials, CASES, 2)
    assert result["headline"] is None
    assert result["flags"] == ["flaky"]
    assert "negative-delta" not in "\n".join(render_comparison_text(result))


# --- telemetry ---------------------------------------------------------------------------


def test_deltas_over_pairs_where_both_sides_measured() -> None:
    trials = design(CASES, 2, known, input_tokens=100, output_tokens=10, tool_calls=2)
    trials = [
        dataclasses.replace(t, input_tokens=200, tool_calls=5, latency_s=3.0)
        if t.variant == CAND
        else dataclasses.replace(t, latency_s=1.0)
        for t in trials
    ]
    trials = replace(trials, "a", 1, CAND, output_tokens=None)  # half the tokens: unmeasured
    trials = replace(trials, "b", 2, BASE, tool_calls=None)
    trials = replace(trials, "c", 1, BASE, latency_s=float("nan"))  # a broken meter
    trials = replace(trials, "c", 2, BASE, latency_s=-1.0)
    deltas = run(trials, CASES, 2)["deltas"]
    assert deltas["tokens"] == {
        "mean_delta": 100,
        "candidate_mean": 210,
        "baseline_mean": 110,
        "pairs_measured": 5,
        "coverage": "5/6 pairs measured",
    }
    assert deltas["tool_calls"]["mean_delta"] == 3
    assert deltas["tool_calls"]["coverage"] == "5/6 pairs measured"
    assert deltas["latency_s"]["mean_delta"] == 2.0
    assert deltas["latency_s"]["coverage"] == "4/6 pairs measured"
    # No price: unavailable, never zero.
    assert deltas["cost_usd"] == {
        "mean_delta": None,
        "status": "unavailable",
        "coverage": "0/6 pairs measured",
    }
    lines = render_comparison_text(run(trials, CASES, 2))
    assert "Tokens +100 (with_docs 210, without_docs 110, 5/6 pairs measured)" in lines
    assert "Latency +2.0 s (with_docs 3.0 s, without_docs 1.0 s, 4/6 pairs measured)" in lines
    assert "Est. cost unavailable (0/6 pairs measured)" in lines


def test_deltas_use_only_eligible_pairs() -> None:
    trials = design(CASES, 2, known, cost_usd=0.01)
    trials = replace(trials, "a", 1, CAND, cost_usd=1.0, outcome="error", error_kind="infra_error")
    delta = run(trials, CASES, 2)["deltas"]["cost_usd"]
    assert delta["mean_delta"] == 0.0 and delta["coverage"] == "5/5 pairs measured"


def test_totals_count_every_trial_of_the_arm_with_coverage() -> None:
    trials = design(CASES, 2, known, input_tokens=100, output_tokens=10, latency_s=2.5)
    trials = replace(trials, "a", 1, CAND, outcome="error", error_kind="infra_error")
    trials = replace(trials, "b", 1, CAND, input_tokens=None)
    trials = replace(trials, "c", 1, CAND, cost_usd=0.5)
    totals = run(trials, CASES, 2)["totals"]
    assert totals[CAND]["trials"] == totals[BASE]["trials"] == 6
    # The errored trial still spent tokens: it is in the total.
    assert totals[CAND]["tokens"] == {
        "total": 550,
        "trials_measured": 5,
        "coverage": "5/6 trials measured",
    }
    assert totals[CAND]["cost_usd"] == {
        "total": 0.5,
        "trials_measured": 1,
        "coverage": "1/6 trials measured",
    }
    assert totals[BASE]["latency_s"]["total"] == 15.0
    assert totals[BASE]["cost_usd"] == {
        "total": None,
        "status": "unavailable",
        "coverage": "0/6 trials measured",
    }
    assert totals[BASE]["tool_calls"]["status"] == "unavailable"


# --- order and text ----------------------------------------------------------------------


def test_order_shows_the_counterbalancing() -> None:
    trials = drop(design(CASES, 2, known), "c", 2, CAND)
    order = run(trials, CASES, 2)["order"]
    assert order == [
        {"case": "a", "round": 1, "first": BASE},
        {"case": "a", "round": 2, "first": CAND},
        {"case": "b", "round": 1, "first": BASE},
        {"case": "b", "round": 2, "first": CAND},
        {"case": "c", "round": 1, "first": BASE},
        {"case": "c", "round": 2, "first": None},
    ]
    lines = render_comparison_text(run(trials, CASES, 2))
    assert (
        "Order: round 1: without_docs first 3; round 2: with_docs first 2, 1 without both arms"
        in lines
    )


def test_published_text() -> None:
    result = run(design(CASES, 2, known, tool_calls=4), CASES, 2)
    head = result["headline"]
    lines = render_comparison_text(result)
    low, high = head["lift_ci95_pp"]
    assert lines[0] == "with_docs vs without_docs (baseline)"
    assert lines[1] == "Pairs 6/6 eligible"
    assert lines[2] == (
        f"Pass rate +16.7 pp [95% CI {low:+.1f} to {high:+.1f} pp] "
        "(with_docs 50.0%, without_docs 33.3%)"
    )
    assert lines[3] == (
        f"Wins 2, ties 3, losses 1; McNemar mid-p {head['mcnemar_midp']:.3f}; "
        f"MDE {head['mde_pp']:.1f} pp (80% power, alpha 0.05)"
    )
    assert lines[4] == "pass^2 with_docs 33.3%, without_docs 33.3%"
    assert lines[5] == "Flags: flaky (flaky cases with_docs: b)"
    assert "Tokens unavailable (0/6 pairs measured)" in lines
    assert "Tool calls +0.0 (with_docs 4.0, without_docs 4.0, 6/6 pairs measured)" in lines
    assert "Blocked pairs:" not in lines
    totals = lines[lines.index("Operational totals:") + 1]
    assert totals.startswith("  with_docs: 6 trials; tokens unavailable (0/6); tool calls 24 (6/6)")
