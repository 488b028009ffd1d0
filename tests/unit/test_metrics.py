"""The statistics layer against independent references: enumeration, scipy and simulation."""

from __future__ import annotations

import argparse
import itertools
import json
import math
import random
import statistics
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import scipy.stats  # type: ignore[import-untyped]  # no stubs; tests only

from service.report.commands import add_commands
from service.report.estimates import (
    CaseOutcomes,
    bootstrap_ci,
    clustered_stderr,
    pass_at_1,
    pass_at_k,
    pass_hat_k,
    stderr_of_case_values,
    summarize,
    wilson_interval,
)


def random_cases(rng: random.Random, count: int, max_n: int) -> dict[str, list[bool]]:
    cases: dict[str, list[bool]] = {}
    for i in range(count):
        rate = rng.random()
        cases[f"case-{i}"] = [rng.random() < rate for _ in range(rng.randint(0, max_n))]
    return cases


# --- estimators against brute force ------------------------------------------------------


def brute(cases: CaseOutcomes, k: int) -> tuple[Fraction | None, Fraction | None]:
    """pass^k and pass@k by enumerating every k-subset of each case's trials, exactly."""
    hat: list[Fraction] = []
    at: list[Fraction] = []
    for trials in cases.values():
        if len(trials) < k:
            continue
        subsets = list(itertools.combinations(trials, k))
        hat.append(Fraction(sum(all(s) for s in subsets), len(subsets)))
        at.append(Fraction(sum(any(s) for s in subsets), len(subsets)))
    if not hat:
        return None, None
    return sum(hat, Fraction(0)) / len(hat), sum(at, Fraction(0)) / len(at)


@pytest.mark.parametrize("seed", range(40))
def test_estimators_equal_enumeration_over_all_k_subsets(seed: int) -> None:
    rng = random.Random(seed)
    cases = random_cases(rng, count=rng.randint(1, 12), max_n=8)
    with_trials = [trials for trials in cases.values() if trials]
    expected_at_1 = (
        sum((Fraction(sum(t), len(t)) for t in with_trials), Fraction(0)) / len(with_trials)
        if with_trials
        else None
    )
    # Both sides round an exact rational once, so equality is exact, not approximate.
    assert pass_at_1(cases) == (None if expected_at_1 is None else float(expected_at_1))
    for k in range(1, 7):
        hat, at = brute(cases, k)
        assert pass_hat_k(cases, k) == (None if hat is None else float(hat)), k
        assert pass_at_k(cases, k) == (None if at is None else float(at)), k


def test_pass_at_k_with_k_1_is_pass_at_1() -> None:
    cases = random_cases(random.Random(5), count=50, max_n=6)
    assert pass_at_k(cases, 1) == pass_hat_k(cases, 1) == pass_at_1(cases)


def test_case_weighting_not_trial_weighting() -> None:
    # 1/1 and 0/9: per-case mean 0.5, while pooling trials would say 0.1.
    assert pass_at_1({"a": [True], "b": [False] * 9}) == 0.5


def test_all_pass_and_none_pass() -> None:
    everything = {"a": [True] * 3, "b": [True] * 5}
    nothing = {"a": [False] * 3, "b": [False] * 5}
    for k in (1, 2, 3):
        assert pass_hat_k(everything, k) == pass_at_k(everything, k) == 1.0
        assert pass_hat_k(nothing, k) == pass_at_k(nothing, k) == 0.0
    assert pass_at_1(everything) == 1.0
    assert pass_at_1(nothing) == 0.0


def test_pass_hat_k_with_n_equal_k_is_fraction_of_cases_passing_every_trial() -> None:
    cases = {"a": [True, True, True], "b": [True, False, True], "c": [True, True, True]}
    assert pass_hat_k(cases, 3) == 2 / 3
    assert pass_at_k(cases, 3) == 1.0


def test_cases_with_fewer_than_k_trials_are_left_out_or_none() -> None:
    cases = {"a": [True, False], "b": [True], "c": []}
    assert pass_hat_k(cases, 3) is None
    assert pass_at_k(cases, 3) is None
    assert pass_at_1({"c": []}) is None
    assert pass_at_1({}) is None
    # Only "a" has 2 trials: pass^2 is its C(1,2)/C(2,2) = 0, "b" does not dilute it.
    assert pass_hat_k(cases, 2) == 0.0
    assert pass_at_k(cases, 2) == 1.0


@pytest.mark.parametrize("k", [0, -1, True, 1.0, "2"])
def test_bad_k_is_refused(k: Any) -> None:
    with pytest.raises(ValueError, match="k must be a positive integer"):
        pass_hat_k({"a": [True]}, k)
    with pytest.raises(ValueError, match="k must be a positive integer"):
        summarize({"a": [True]}, k, seed=0)


def test_non_boolean_outcomes_are_refused() -> None:
    bad: Any = {"a": [True, 1]}
    with pytest.raises(ValueError, match=r"case 'a'.*booleans, got 1"):
        pass_at_1(bad)


# --- summarize ----------------------------------------------------------------------------


def test_summarize_nulls_with_reasons_never_nan() -> None:
    summary = summarize({"a": [True, False], "b": [True, True]}, 3, seed=11)
    json.dumps(summary, allow_nan=False)  # raises on NaN or infinity anywhere
    assert summary["k"] == 3 and summary["cases"] == 2 and summary["trials"] == 4
    assert summary["seed"] == 11
    for key in ("pass_hat_k", "pass_at_k"):
        assert summary[key] == {
            "value": None,
            "ci95": None,
            "stderr_clustered": None,
            "reason": "no case has 3 scored trials (k=3); the largest n is 2",
            "cases_used": 0,
        }
    at_1 = summary["pass_at_1"]
    assert at_1["value"] == 0.75 and at_1["reason"] is None and at_1["cases_used"] == 2
    assert at_1["stderr_clustered"] == clustered_stderr({"a": [True, False], "b": [True, True]})


def test_summarize_one_case_has_a_value_but_no_interval() -> None:
    summary = summarize({"a": [True, False, True], "b": [True]}, 3, seed=0)
    hat = summary["pass_hat_k"]
    assert hat["value"] == 0.0 and hat["ci95"] is None and hat["stderr_clustered"] is None
    assert hat["cases_used"] == 1 and "need at least 2 cases" in hat["reason"]
    assert summary["pass_at_1"]["ci95"] is not None


def test_summarize_nothing_at_all() -> None:
    summary = summarize({}, 2, seed=0)
    json.dumps(summary, allow_nan=False)
    assert summary["pass_at_1"]["value"] is None
    assert summary["pass_at_1"]["reason"] == "no case has a scored trial"
    assert (
        summary["pass_hat_k"]["reason"] == "no case has 2 scored trials (k=2); there are no cases"
    )


def test_summarize_matches_the_parts_and_is_reproducible() -> None:
    cases = random_cases(random.Random(3), count=25, max_n=5)
    summary = summarize(cases, 2, seed=99)
    assert summary == summarize(cases, 2, seed=99)
    used = {c: t for c, t in cases.items() if len(t) >= 2}
    assert summary["pass_hat_k"]["value"] == pass_hat_k(cases, 2)
    assert summary["pass_hat_k"]["cases_used"] == len(used)
    assert summary["pass_hat_k"]["ci95"] == list(
        bootstrap_ci(used, lambda s: pass_hat_k(s, 2), seed=99) or ()
    )
    assert summary["pass_at_1"]["stderr_clustered"] == clustered_stderr(cases)


# --- clustered standard error -------------------------------------------------------------


def test_clustered_stderr_is_the_sem_of_per_case_means() -> None:
    cases = random_cases(random.Random(8), count=40, max_n=7)
    means = [sum(t) / len(t) for t in cases.values() if t]
    se = clustered_stderr(cases)
    assert se == pytest.approx(float(scipy.stats.sem(means, ddof=1)), rel=1e-12)


@pytest.mark.parametrize("seed", range(3))
def test_clustered_stderr_is_statistics_stdev_to_the_bit(seed: int) -> None:
    """The stderr's stdev counts each distinct value once; it must be the standard library's
    exact, correctly rounded stdev to the last bit, over pass rates, wide-ranging floats and
    extremes."""
    rng = random.Random(seed)
    for design in range(300):
        n, k = rng.randint(2, 300), rng.randint(1, 12)
        values = [
            [rng.randint(0, k) / k for _ in range(n)],
            [rng.random() * 10 ** rng.randint(-8, 8) for _ in range(n)],
            [rng.choice([0.0, 1.0, 1 / 3, 2 / 3, 1e-300, 1e300]) for _ in range(n)],
        ][design % 3]
        assert stderr_of_case_values(values) == statistics.stdev(values) / math.sqrt(n)


def test_clustered_stderr_equals_millers_formula_with_small_sample_factor() -> None:
    # Miller (2024) eq. 4 over trials, equal cluster sizes: Var = Var_CLT + cross terms
    # = (1/T^2) sum_c (sum_j (s_cj - mean))^2, T trials in all. Our SE applies N/(N-1).
    rng = random.Random(21)
    cases = {f"c{i}": [rng.random() < rng.random() for _ in range(4)] for i in range(30)}
    scores = [[float(s) for s in trials] for trials in cases.values()]
    total = sum(len(t) for t in scores)
    mean = sum(map(sum, scores)) / total
    var_clt = sum((s - mean) ** 2 for t in scores for s in t) / total**2
    cross = sum(
        (t[i] - mean) * (t[j] - mean) for t in scores for i in range(4) for j in range(4) if i != j
    ) / (total**2)
    miller = math.sqrt(var_clt + cross)
    n = len(cases)
    assert clustered_stderr(cases) == pytest.approx(miller * math.sqrt(n / (n - 1)), rel=1e-12)


def test_clustered_stderr_exceeds_naive_when_cases_differ_in_difficulty() -> None:
    # Half the cases always pass, half never do: trials within a case are perfectly correlated.
    cases = {f"c{i}": [i % 2 == 0] * 5 for i in range(20)}
    trials = [s for t in cases.values() for s in t]
    naive = math.sqrt(0.25 / len(trials))
    se = clustered_stderr(cases)
    assert se is not None and se > 2 * naive


def test_clustered_stderr_needs_two_cases() -> None:
    assert clustered_stderr({"a": [True, False]}) is None
    assert clustered_stderr({"a": [True, False], "b": []}) is None
    assert clustered_stderr({}) is None


# --- bootstrap ----------------------------------------------------------------------------


def test_bootstrap_is_reproducible_and_seeded() -> None:
    cases = random_cases(random.Random(4), count=20, max_n=4)
    used = {c: t for c, t in cases.items() if t}
    first = bootstrap_ci(used, pass_at_1, seed=1)
    assert first == bootstrap_ci(used, pass_at_1, seed=1)
    assert first != bootstrap_ci(used, pass_at_1, seed=2)
    # The same cases in another order: the same interval (the seed fixes it, not the order).
    assert first == bootstrap_ci(dict(reversed(list(used.items()))), pass_at_1, seed=1)
    estimate = pass_at_1(used)
    assert first is not None and estimate is not None
    assert first[0] <= estimate <= first[1]


@pytest.mark.parametrize("method", [1, 2])
def test_bootstrap_agrees_with_scipy_percentile_interval(method: int) -> None:
    rng = random.Random(12)
    cases = {f"c{i}": [rng.random() < rng.betavariate(2, 2) for _ in range(3)] for i in range(40)}
    means = np.array([sum(t) / len(t) for t in cases.values()])
    reference = scipy.stats.bootstrap(
        (means,), np.mean, method="percentile", n_resamples=20000, rng=np.random.default_rng(0)
    ).confidence_interval
    ours = bootstrap_ci(cases, pass_at_1, seed=0, resamples=20000, method=method)
    assert ours is not None
    # Different random streams: the endpoints differ by Monte Carlo error only (SD ~0.001 at
    # 20000 resamples for an SE near 0.06), so 0.01 is several SDs yet far below the width.
    assert ours[0] == pytest.approx(reference.low, abs=0.01)
    assert ours[1] == pytest.approx(reference.high, abs=0.01)


def test_bootstrap_edge_cases() -> None:
    assert bootstrap_ci({"a": [True]}, pass_at_1, seed=0) is None
    assert bootstrap_ci({}, pass_at_1, seed=0) is None
    assert bootstrap_ci({"a": [True, True], "b": [True]}, pass_at_1, seed=0) == (1.0, 1.0)
    with pytest.raises(ValueError, match="resamples must be a positive integer"):
        bootstrap_ci({"a": [True], "b": [False]}, pass_at_1, seed=0, resamples=0)
    with pytest.raises(ValueError, match="pass only the cases it uses"):
        bootstrap_ci({"a": [True], "b": [False]}, lambda s: pass_hat_k(s, 2), seed=0)


@pytest.mark.parametrize("method", [1, 2])
def test_bootstrap_interval_covers_the_true_rate_about_95_percent_of_the_time(method: int) -> None:
    """Interval honesty: many designs with a known population pass@1.

    A design is 30 cases, three trials each, whose true pass rates are drawn from
    Beta(0.5, 0.75): U-shaped, most cases nearly always or nearly never pass, as in real
    suites. The population pass@1 (the expected rate of a random case) is 0.5 / 1.25 = 0.4.

    Tolerance: over 400 designs the observed coverage of a 95% interval has a binomial SE of
    sqrt(0.95 * 0.05 / 400) ~ 1.1 pp. The percentile bootstrap of a mean runs slightly narrow
    at 30 clusters (about sqrt(29/30) of the width), and skew moves it a little either way,
    so 0.90-0.99 leaves an honest interval > 3 SE of room on each side. The bar still has
    teeth: the classic mistake, resampling trials as if independent, ignores the
    within-case correlation (design effect ~1.9 here) and covers only ~85%; it is run on the
    same designs below and must fail the bar. Seeds are fixed, so the test is deterministic.
    """
    rng = random.Random(2024)
    truth = 0.5 / (0.5 + 0.75)
    designs = 400
    covered_bootstrap = covered_se = covered_by_trial = 0
    for design in range(designs):
        cases = {
            f"c{i}": [rng.random() < rate for _ in range(3)]
            for i, rate in enumerate(rng.betavariate(0.5, 0.75) for _ in range(30))
        }
        interval = bootstrap_ci(cases, pass_at_1, seed=design, resamples=500, method=method)
        assert interval is not None
        covered_bootstrap += interval[0] <= truth <= interval[1]
        # The clustered SE should be honest too: a normal interval built from it.
        estimate, se = pass_at_1(cases), clustered_stderr(cases)
        assert estimate is not None and se is not None
        covered_se += abs(estimate - truth) <= 1.96 * se
        # The wrong unit: every trial its own "case".
        trials = {f"t{j}": [s] for j, s in enumerate(s for t in cases.values() for s in t)}
        wrong = bootstrap_ci(trials, pass_at_1, seed=design, resamples=250, method=method)
        assert wrong is not None
        covered_by_trial += wrong[0] <= truth <= wrong[1]
    assert 0.90 <= covered_bootstrap / designs <= 0.99, covered_bootstrap
    assert 0.90 <= covered_se / designs <= 0.99, covered_se
    assert covered_by_trial / designs < 0.90, covered_by_trial


# --- Wilson ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("successes", "n"), [(0, 1), (0, 10), (3, 10), (10, 10), (1, 2), (57, 200)]
)
def test_wilson_matches_scipy(successes: int, n: int) -> None:
    z = float(scipy.stats.norm.ppf(0.975))
    reference = scipy.stats.binomtest(successes, n).proportion_ci(0.95, method="wilson")
    low, high = wilson_interval(successes, n, z=z) or (math.nan, math.nan)
    assert low == pytest.approx(reference.low, abs=1e-12)
    assert high == pytest.approx(reference.high, abs=1e-12)
    assert 0.0 <= low <= successes / n <= high <= 1.0


def test_wilson_edges_and_bad_input() -> None:
    assert wilson_interval(0, 0) is None
    low, high = wilson_interval(0, 5) or (1.0, 0.0)
    assert low == 0.0 and 0 < high < 1
    for args, message in [
        ((-1, 5), "successes must be a non-negative integer"),
        ((6, 5), r"successes \(6\) cannot exceed n \(5\)"),
        ((1, True), "n must be a non-negative integer"),
    ]:
        with pytest.raises(ValueError, match=message):
            wilson_interval(*args)
    with pytest.raises(ValueError, match="z must be a positive finite number"):
        wilson_interval(1, 2, z=math.nan)


# --- the stats command ---------------------------------------------------------------------


def run_cli(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="examhall")
    add_commands(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    code: int = args.func(args)
    return code


def write_lines(path: Path, rows: list[str]) -> Path:
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


def test_stats_json_equals_summarize(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rng = random.Random(6)
    rows: list[str] = []
    cases: dict[str, list[bool]] = {}
    for i in range(12):
        for _ in range(rng.randint(1, 4)):
            passed = rng.random() < 0.6
            cases.setdefault(f"case-{i}", []).append(passed)
            rows.append(json.dumps({"case": f"case-{i}", "passed": passed, "trial": "extra"}))
    rng.shuffle(rows)  # the order of lines does not matter, only which case each belongs to
    rows.insert(3, "   ")
    path = write_lines(tmp_path / "trials.jsonl", rows)
    assert run_cli(["stats", str(path), "--k", "3", "--seed", "5", "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed == summarize(cases, 3, seed=5)
    for key in ("pass_at_1", "pass_hat_k", "pass_at_k"):
        assert {"value", "ci95", "stderr_clustered", "reason"} <= printed[key].keys()


def test_stats_text_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_lines(
        tmp_path / "t.jsonl",
        [json.dumps({"case": c, "passed": p}) for c, p in [("a", True), ("a", False), (2, True)]],
    )
    assert run_cli(["stats", str(path), "--k", "2"]) == 0
    out = capsys.readouterr().out
    assert "cases 2  trials 3  k 2  seed 0" in out
    assert "pass@1  0.7500" in out
    assert "pass^2" in out and "need at least 2 cases" in out


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ("{not json", "not JSON"),
        ("[1, 2]", "expected an object, got list"),
        ('{"passed": true}', 'missing "case"'),
        ('{"case": "a"}', 'missing "passed"'),
        ('{"case": "a", "passed": 1}', '"passed" must be true or false, got 1'),
        ('{"case": true, "passed": true}', '"case" must be a non-empty string or an integer'),
    ],
)
def test_stats_malformed_line_exits_2_naming_file_and_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], bad: str, message: str
) -> None:
    good = json.dumps({"case": "a", "passed": True})
    path = write_lines(tmp_path / "bad.jsonl", [good, "", good, bad, good])
    assert run_cli(["stats", str(path), "--k", "1", "--json"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert f"{path}:4: {message}" in captured.err


def test_stats_bad_utf8_and_missing_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "latin1.jsonl"
    path.write_bytes(b'{"case": "a", "passed": true}\n{"case": "caf\xe9", "passed": true}\n')
    assert run_cli(["stats", str(path), "--k", "1"]) == 2
    assert f"{path}:2: not UTF-8" in capsys.readouterr().err
    assert run_cli(["stats", str(tmp_path / "absent.jsonl"), "--k", "1"]) == 2
    assert "cannot read" in capsys.readouterr().err


def test_stats_bad_k_is_an_argparse_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        run_cli(["stats", "whatever.jsonl", "--k", "0"])
    assert exit_info.value.code == 2
    assert "argument --k" in capsys.readouterr().err


def test_all_cases_equal_gets_a_wilson_interval_not_a_point() -> None:
    from service.report.estimates import summarize, wilson_interval

    none_pass = summarize({f"c{i}": [False, False] for i in range(4)}, 2, seed=0)["pass_at_1"]
    assert none_pass["value"] == 0.0
    assert none_pass["ci95"] == list(wilson_interval(0, 4))
    assert none_pass["ci95"][1] > 0.3  # 4 cases cannot rule out a rate of a third
    assert "Wilson" in none_pass["reason"]
    all_pass = summarize({f"c{i}": [True] for i in range(20)}, 1, seed=0)["pass_at_1"]
    assert all_pass["ci95"][1] == 1.0 and 0.8 < all_pass["ci95"][0] < 1.0
