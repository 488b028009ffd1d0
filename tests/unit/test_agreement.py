"""Cohen's kappa and its interval (service/report/agreement.py) against independent
computations: a textbook's worked example, and statsmodels' `cohens_kappa`."""

from __future__ import annotations

import itertools
import math

import pytest
from statsmodels.stats.inter_rater import cohens_kappa  # type: ignore[import-untyped]

from service.report.agreement import Counts, ReviewedTrial, build_agreement, kappa, tally


def test_the_worked_example_gives_its_published_kappa() -> None:
    # Wikipedia's "Cohen's kappa" example: 50 proposals, both readers yes on 20, A yes and
    # B no on 5, A no and B yes on 10, both no on 15; p_o = 0.7, p_e = 0.5, kappa = 0.4.
    view = kappa(Counts(20, 5, 10, 15))
    assert view.value == pytest.approx(0.4)


TABLES = [
    Counts(20, 5, 10, 15),
    Counts(45, 3, 7, 5),
    Counts(8, 0, 2, 10),
    Counts(3, 4, 5, 2),  # worse than chance
    Counts(1, 1, 1, 1),
    Counts(90, 9, 1, 0),
    Counts(12, 1, 0, 7),
]


@pytest.mark.parametrize("counts", TABLES, ids=[f"{t.a}-{t.b}-{t.c}-{t.d}" for t in TABLES])
def test_kappa_its_standard_error_and_interval_match_statsmodels(counts: Counts) -> None:
    theirs = cohens_kappa([[counts.a, counts.b], [counts.c, counts.d]])
    ours = kappa(counts)
    assert ours.value == pytest.approx(theirs.kappa, abs=1e-12)
    assert ours.stderr == pytest.approx(theirs.std_kappa, abs=1e-12)
    assert ours.ci95 is not None
    assert ours.ci95[0] == pytest.approx(max(-1.0, theirs.kappa_low), abs=1e-9)
    assert ours.ci95[1] == pytest.approx(min(1.0, theirs.kappa_upp), abs=1e-9)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # statsmodels' own, on those tables
def test_every_small_table_matches_statsmodels_or_says_why_not() -> None:
    for a, b, c, d in itertools.product(range(4), repeat=4):
        counts, n = Counts(a, b, c, d), a + b + c + d
        ours = kappa(counts)
        if n == 0 or ours.value is None:
            assert ours.reason and ours.ci95 is None
            continue
        theirs = cohens_kappa([[a, b], [c, d]])
        assert ours.value == pytest.approx(theirs.kappa, abs=1e-12), (a, b, c, d)
        if ours.ci95 is None:
            assert "standard error is 0" in (ours.reason or "")
            # Theirs takes the square root of a rounding error below zero: NaN, or about 0.
            assert math.isnan(theirs.std_kappa) or theirs.std_kappa == pytest.approx(0, abs=1e-6)
        else:
            assert ours.stderr == pytest.approx(theirs.std_kappa, abs=1e-12), (a, b, c, d)


def test_kappa_is_undefined_when_both_gave_one_verdict_to_everything() -> None:
    view = kappa(Counts(9, 0, 0, 0))
    assert view.value is None and "chance agreement is 100%" in (view.reason or "")


def _reviewed(variant: str, case: str, round_: int, passed: bool, human: bool) -> ReviewedTrial:
    judge = ("file_equals", passed)
    return ReviewedTrial(
        f"{variant}-{case}-{round_}", variant, case, round_, passed, (judge,), human
    )


def test_rows_per_judge_and_variant_and_the_lift_check() -> None:
    reviewed = [
        _reviewed("without_docs", "a", 1, False, False),
        _reviewed("with_docs", "a", 1, True, True),
        _reviewed("without_docs", "b", 1, True, False),  # the judge passed what people failed
        _reviewed("with_docs", "b", 1, True, True),
        _reviewed("with_docs", "c", 1, False, False),  # its other arm is not reviewed
    ]
    agreement = build_agreement(
        reviewed,
        sampled=8,
        variants=["without_docs", "with_docs"],
        comparisons=[("without_docs", "with_docs", 40.0)],
    )
    assert agreement is not None
    assert (agreement.sampled, agreement.reviewed) == (8, 5)
    keys = [(row.judge, row.variant) for row in agreement.rows]
    assert keys == [
        (None, "without_docs"),
        (None, "with_docs"),
        (None, "all"),
        ("file_equals", "without_docs"),
        ("file_equals", "with_docs"),
        ("file_equals", "all"),
    ]
    pooled = agreement.rows[2]
    assert pooled.reviewed == 5 and pooled.percent_agreement == pytest.approx(0.8)
    assert pooled.confusion.human_fail_judge_pass == 1
    assert pooled.human_pass_rate == pytest.approx(0.4)
    assert pooled.judge_pass_rate == pytest.approx(0.6)
    (check,) = agreement.lift_checks
    # Pairs a and b: people 0->1 and 0->1 (+100 pp), judges 0->1 and 1->1 (+50 pp).
    assert check.pairs_reviewed == 2
    assert (check.human_lift_pp, check.judge_lift_pp) == (100.0, 50.0)
    assert check.confirms is True and "same direction (up)" in check.finding


def test_no_review_means_no_section() -> None:
    assert build_agreement([], sampled=10, variants=["v"]) is None


def test_a_zero_variance_is_reported_as_none_measured_not_as_a_rounding_error() -> None:
    """When one side gives every trial the same verdict, kappa's asymptotic variance is 0 in
    exact arithmetic; in floats it comes out near 1e-17, whose root once printed as a real
    interval (`+0.00 [95% CI -0.00 to +0.00]`)."""
    for n in range(2, 13):
        for judge_yes in range(n + 1):
            # The person fails every trial; the judge passes `judge_yes` of them.
            pairs = [(False, True)] * judge_yes + [(False, False)] * (n - judge_yes)
            view = kappa(tally(pairs))
            assert view.ci95 is None, (n, judge_yes, view)
            assert view.stderr in (None, 0.0), (n, judge_yes, view)
