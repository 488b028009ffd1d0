"""Pass rates and their uncertainty, computed from scored trials grouped by case.

Pure functions over plain data: no I/O, no database. The bootstrap's draws come from
`resampling`, by method version (version 1 is the standard library's, versions 2 and 3
numpy's, vectorised). The case is the unit throughout: a case with ten trials is still one
case, so intervals and standard errors resample or cluster by case, never by trial.

For case i with n_i scored trials and c_i passes (docs/reference/statistics.md):

- pass@1 = mean_i c_i/n_i over cases with n_i >= 1
- pass^k = mean_i C(c_i,k)/C(n_i,k) over cases with n_i >= k (tau-bench): the chance that k
  trials drawn without replacement from the case's n_i all pass
- pass@k = mean_i [1 - C(n_i-c_i,k)/C(n_i,k)] over cases with n_i >= k (Chen et al. 2021):
  the chance that at least one of k such trials passes

No function returns NaN. Where a number cannot be computed it is None, and `estimate` says
why in the metric's `reason`.
"""

from __future__ import annotations

import dataclasses
import math
import sys
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from fractions import Fraction
from statistics import NormalDist
from typing import Any

from service.report import resampling

CaseOutcomes = Mapping[str, Sequence[bool]]
"""Case id -> the outcomes of its scored trials (True = passed). Errored trials are not here."""

Statistic = Callable[[CaseOutcomes], float | None]

DEFAULT_RESAMPLES = 2000

# Per-case estimator: (n, c) -> the case's value as an exact fraction (numerator, denominator).
_Estimator = Callable[[int, int], tuple[int, int]]


def _check_k(k: object) -> int:
    # bool is an int subclass; `k=True` is almost certainly a bug, so it is refused.
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}")
    return k


def _tally(cases: CaseOutcomes) -> list[tuple[int, int]]:
    """(n_i, c_i) for every case, refusing outcomes that are not booleans."""
    tallies: list[tuple[int, int]] = []
    for case_id, trials in cases.items():
        passes = 0
        for outcome in trials:
            # Strict: 1, "yes" or None would silently count as a pass or a fail otherwise.
            if outcome is True:
                passes += 1
            elif outcome is not False:
                raise ValueError(
                    f"case {case_id!r}: trial outcomes must be booleans, got {outcome!r}"
                )
        tallies.append((len(trials), passes))
    return tallies


def _exact_mean(fractions: Sequence[tuple[int, int]]) -> float:
    """The mean of numerator/denominator pairs, computed exactly and rounded once.

    Summing per-case floats would round at every step, so two evaluators that add in a
    different order could disagree in the last bit. Over a common denominator the sum is an
    integer, and Python's int / int is correctly rounded: the result is the float nearest the
    true rational mean, whatever the order of the cases.
    """
    common = math.lcm(*(den for _, den in fractions))
    total = sum(num * (common // den) for num, den in fractions)
    return total / (common * len(fractions))


def _pass_at_1_case(n: int, c: int) -> tuple[int, int]:
    return c, n


def _pass_hat_k_case(k: int) -> _Estimator:
    return lambda n, c: (math.comb(c, k), math.comb(n, k))


def _pass_at_k_case(k: int) -> _Estimator:
    return lambda n, c: (math.comb(n, k) - math.comb(n - c, k), math.comb(n, k))


def _mean_over(cases: CaseOutcomes, min_n: int, estimator: _Estimator) -> float | None:
    return _mean_of_tallies(_tally(cases), min_n, estimator)


def _mean_of_tallies(
    tallies: Sequence[tuple[int, int]], min_n: int, estimator: _Estimator
) -> float | None:
    fractions = [estimator(n, c) for n, c in tallies if n >= min_n]
    return _exact_mean(fractions) if fractions else None


def pass_at_1_of(tallies: Sequence[tuple[int, int]]) -> float | None:
    """`pass_at_1` from each case's (n_i, c_i)."""
    return _mean_of_tallies(tallies, 1, _pass_at_1_case)


def pass_hat_k_of(tallies: Sequence[tuple[int, int]], k: int) -> float | None:
    """`pass_hat_k` from each case's (n_i, c_i)."""
    k = _check_k(k)
    return _mean_of_tallies(tallies, k, _pass_hat_k_case(k))


def pass_at_1(cases: CaseOutcomes) -> float | None:
    """mean_i c_i/n_i over cases with at least one scored trial; None when there is none."""
    return _mean_over(cases, 1, _pass_at_1_case)


def pass_hat_k(cases: CaseOutcomes, k: int) -> float | None:
    """tau-bench's pass^k over cases with n_i >= k; None when no case has k scored trials."""
    k = _check_k(k)
    return _mean_over(cases, k, _pass_hat_k_case(k))


def pass_at_k(cases: CaseOutcomes, k: int) -> float | None:
    """Chen et al.'s unbiased pass@k over cases with n_i >= k; None when no case qualifies."""
    k = _check_k(k)
    return _mean_over(cases, k, _pass_at_k_case(k))


def stderr_of_case_values(values: Sequence[float]) -> float | None:
    """Cluster-robust standard error of a mean of per-case values (the case is the cluster).

    Every metric here is theta = (1/N) sum_i v_i, with v_i computed from case i's trials only
    (v_i = c_i/n_i for pass@1, C(c_i,k)/C(n_i,k) for pass^k, ...). Written over trials, theta
    is a weighted mean with weight 1/(N n_i) on each of case i's trials, and the clustered
    (sandwich) variance of such a mean is the sum over clusters of the squared summed
    weighted residuals:

        Var_CR0 = sum_i ((1/N) (v_i - theta))^2 = sum_i (v_i - theta)^2 / N^2

    With equal n_i this is exactly Miller (2024, "Adding Error Bars to Evals", eq. 4):
    Var_CLT plus the within-cluster cross terms. We apply the usual small-sample factor
    N/(N-1) (CR1), giving

        SE = sqrt( sum_i (v_i - theta)^2 / (N (N - 1)) )

    i.e. the sample standard deviation of the per-case values over sqrt(N), which is unbiased
    for the variance when cases are drawn independently from a population of cases. Trials
    within a case are correlated (an easy case passes again), so this is wider than the naive
    binomial SE over all trials whenever cases differ in difficulty.
    """
    if len(values) < 2:
        return None
    return _exact_stdev(values) / math.sqrt(len(values))


def _exact_stdev(values: Sequence[float]) -> float:
    """`statistics.stdev(values)` to the bit, from each distinct value once: the cases of a
    report take few distinct values (a pass rate over k rounds one of k + 1), and stdev
    converted all 10,000 of a large report's to fractions.

    As stdev does: the sum and the sum of squares exactly, as integers over each value's
    power-of-two denominator, the sample variance as one fraction, and its square root
    correctly rounded, so there is no cancellation error and one float is the answer."""
    sx: dict[int, int] = defaultdict(int)
    sxx: dict[int, int] = defaultdict(int)
    for value, count in Counter(values).items():
        numerator, denominator = value.as_integer_ratio()
        sx[denominator] += count * numerator
        sxx[denominator] += count * numerator * numerator
    n = len(values)
    total = sum((Fraction(num, den) for den, num in sx.items()), Fraction(0))
    squares = sum((Fraction(num, den * den) for den, num in sxx.items()), Fraction(0))
    variance = (n * squares - total * total) / n / (n - 1)
    return _sqrt_of_fraction(variance.numerator, variance.denominator)


# Bits of the integer square root worked out before rounding to a float: twice the float's
# 53 and 3 more, so that round-to-odd then rounds to nearest correctly (statistics' own).
_SQRT_BITS = 2 * sys.float_info.mant_dig + 3


def _sqrt_of_fraction(n: int, m: int) -> float:
    """sqrt(n / m) as the nearest float, as statistics computes it (bugs.python.org/msg407078):
    an integer square root rounded to odd, scaled by a power of two, converted once."""
    q = (n.bit_length() - m.bit_length() - _SQRT_BITS) // 2
    if q >= 0:
        return (_isqrt_of_fraction_to_odd(n, m << 2 * q) << q) / 1
    return _isqrt_of_fraction_to_odd(n << -2 * q, m) / (1 << -q)


def _isqrt_of_fraction_to_odd(n: int, m: int) -> int:
    root = math.isqrt(n // m)
    return root | (root * root * m != n)


def clustered_stderr(cases: CaseOutcomes) -> float | None:
    """Standard error of pass@1 with the case as cluster; None with fewer than 2 cases.

    See `stderr_of_case_values` for the formula: SE = sqrt(sum_i (m_i - m)^2 / (N (N-1)))
    over the N cases with a scored trial, m_i = c_i/n_i and m the mean of the m_i.
    """
    return stderr_of_case_values([c / n for n, c in _tally(cases) if n >= 1])


def _quantile(sorted_values: Sequence[float], q: float) -> float:
    """Linear interpolation between order statistics (Hyndman-Fan type 7, numpy's default)."""
    position = (len(sorted_values) - 1) * q
    below = math.floor(position)
    above = min(below + 1, len(sorted_values) - 1)
    fraction = position - below
    return sorted_values[below] + fraction * (sorted_values[above] - sorted_values[below])


def bootstrap_ci(
    cases: CaseOutcomes,
    statistic: Statistic,
    *,
    seed: int,
    resamples: int = DEFAULT_RESAMPLES,
    level: float = 0.95,
    method: int = resampling.V1,
) -> tuple[float, float] | None:
    """Percentile interval (95% unless `level` says otherwise) of `statistic`, resampling
    whole cases with replacement.

    Cases, not trials, are resampled: trials of one case are not independent, and resampling
    them would give intervals that are too narrow. `random.Random(seed)` makes the interval
    reproducible (for a given seed, the same set of cases in any order gives the same
    interval); record the seed and the `method` (`resampling`'s version) with the report.
    Pass only the cases the statistic uses (e.g. those with n_i >= k for pass^k): a resample
    must always yield a value. None when there are fewer than 2 cases (every resample would
    be the same case).
    """
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ValueError(f"seed must be an integer, got {seed!r}")
    if isinstance(resamples, bool) or not isinstance(resamples, int) or resamples < 1:
        raise ValueError(f"resamples must be a positive integer, got {resamples!r}")
    method = resampling.check_version(method)
    # Sorted by id, so the interval depends on which cases there are, not on the order they
    # arrived in (lines of a file, rows from the database).
    outcomes = [cases[case_id] for case_id in sorted(cases)]
    if len(outcomes) < 2:
        return None
    # A resample may hold the same case twice, so it gets fresh keys; the statistic only
    # sees the outcomes, never the ids.
    keys = [str(i) for i in range(len(outcomes))]
    values: list[float] = []
    for picks in resampling.picks(method, len(outcomes), seed=seed, resamples=resamples):
        value = statistic(dict(zip(keys, [outcomes[i] for i in picks], strict=True)))
        if value is None:
            raise ValueError(
                "the statistic gave no value for a bootstrap resample; pass only the cases it uses"
            )
        values.append(value)
    return percentile_interval(values, level)


def percentile_interval(values: list[float], level: float) -> tuple[float, float]:
    """The central `level` interval of a bootstrap distribution (sorts `values`)."""
    values.sort()
    tail = (1.0 - level) / 2
    return _quantile(values, tail), _quantile(values, 1.0 - tail)


def t_quantile(p: float, df: int) -> float:
    """Student's t quantile by the Cornish-Fisher expansion (Abramowitz & Stegun 26.7.5).

    The standard library has no t distribution; at p = 0.975 the expansion is within 0.005
    of the exact value from df = 3 on (3.1786 vs 3.1824 at df = 3, 2.4468 vs 2.4469 at
    df = 6), 0.03 low at df = 2 (4.271 vs 4.303) and 1.4 low at df = 1 (11.30 vs 12.71).
    The low df = 1 value changes nothing: `expanded_level` for two cases is 1.0 either way
    (the normal tail beyond sqrt(2) * 11.3 = 16 is far below a float's resolution next to
    1), so a two-case interval is the full range of its bootstrap distribution.
    """
    z = NormalDist().inv_cdf(p)
    g1 = (z**3 + z) / 4
    g2 = (5 * z**5 + 16 * z**3 + 3 * z) / 96
    g3 = (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / 384
    g4 = (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / 92160
    return z + g1 / df + g2 / df**2 + g3 / df**3 + g4 / df**4


def expanded_level(cases: int, level: float = 0.95) -> float:
    """The percentile level that makes a case bootstrap as wide as a t interval with a
    small-sample correction (Hesterberg 2015, "expanded percentile"): with few cases the
    plain percentile bootstrap is too narrow (about 87% coverage at 7 cases)."""
    if cases < 2:
        return level
    z_wide = math.sqrt(cases / (cases - 1)) * t_quantile(1 - (1 - level) / 2, cases - 1)
    return 1 - 2 * NormalDist().cdf(-z_wide)


def wilson_interval(successes: int, n: int, z: float = 1.96) -> tuple[float, float] | None:
    """Wilson score interval for one proportion (Wilson 1927); None when n is 0.

    Unlike the Wald interval p +- z sqrt(p(1-p)/n) it does not collapse to a point at 0/n
    or n/n and keeps close to its nominal coverage for small n. Use it for a single
    proportion of independent trials; for pass rates over cases use the bootstrap.
    """
    for name, number in (("successes", successes), ("n", n)):
        if isinstance(number, bool) or not isinstance(number, int) or number < 0:
            raise ValueError(f"{name} must be a non-negative integer, got {number!r}")
    if successes > n:
        raise ValueError(f"successes ({successes}) cannot exceed n ({n})")
    if isinstance(z, bool) or not isinstance(z, int | float) or not math.isfinite(z) or z <= 0:
        raise ValueError(f"z must be a positive finite number, got {z!r}")
    if n == 0:
        return None
    p = successes / n
    z2 = z * z
    denominator = 1 + z2 / n
    centre = (p + z2 / (2 * n)) / denominator
    half = z / denominator * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n))
    # At 0/n the lower end is exactly 0 and at n/n the upper end exactly 1; rounding would
    # otherwise leave 1e-17 or 0.9999999999999999, which excludes the observed proportion.
    low = 0.0 if successes == 0 else max(0.0, centre - half)
    high = 1.0 if successes == n else min(1.0, centre + half)
    return low, high


@dataclasses.dataclass(frozen=True)
class Metric:
    """One reported number with its uncertainty. Any None field is explained by `reason`."""

    value: float | None
    ci95: tuple[float, float] | None
    stderr_clustered: float | None
    reason: str | None
    cases_used: int

    def to_json(self) -> dict[str, Any]:
        return {
            "value": self.value,
            "ci95": None if self.ci95 is None else [self.ci95[0], self.ci95[1]],
            "stderr_clustered": self.stderr_clustered,
            "reason": self.reason,
            "cases_used": self.cases_used,
        }


def _trials(k: int) -> str:
    return "1 scored trial" if k == 1 else f"{k} scored trials"


@dataclasses.dataclass(frozen=True)
class _Plan:
    """One metric over the cases with at least `min_n` scored trials, before its interval."""

    min_n: int
    missing: str
    # The per-case values (numerator, denominator) of the cases it uses, in case-id order.
    fractions: tuple[tuple[int, int], ...]

    @property
    def case_values(self) -> list[float]:
        return [num / den for num, den in self.fractions]

    @property
    def bootstrapped(self) -> bool:
        values = self.case_values
        return len(values) >= 2 and min(values) != max(values)


def _metric(plan: _Plan, distribution: list[float] | None) -> Metric:
    """The metric from its plan and, when it needs one, its bootstrap distribution."""
    if not plan.fractions:
        return Metric(None, None, None, plan.missing, 0)
    value = _exact_mean(plan.fractions)
    if len(plan.fractions) < 2:
        reason = (
            f"only 1 case has at least {_trials(plan.min_n)}; "
            "the interval and standard error need at least 2 cases"
        )
        return Metric(value, None, None, reason, 1)
    values = plan.case_values
    if distribution is None:
        # Every case scored the same (typically all 0 or all 1): resampling cases can only
        # reproduce that value, and [0, 0] would claim certainty that 4 cases cannot give.
        # The Wilson interval over cases says how far the rate could be from what we saw.
        return Metric(
            value=value,
            ci95=wilson_interval(round(value * len(values)), len(values)),
            stderr_clustered=stderr_of_case_values(values),
            reason="every case scored the same; the interval is Wilson's over cases",
            cases_used=len(values),
        )
    return Metric(
        value=value,
        ci95=percentile_interval(distribution, 0.95),
        stderr_clustered=stderr_of_case_values(values),
        reason=None,
        cases_used=len(values),
    )


@dataclasses.dataclass(frozen=True)
class Estimates:
    """pass@1, pass^k and pass@k of a set of cases, with what they were computed over."""

    pass_at_1: Metric
    pass_hat_k: Metric
    pass_at_k: Metric
    k: int
    cases: int
    trials: int
    seed: int

    def to_json(self) -> dict[str, Any]:
        return {
            "pass_at_1": self.pass_at_1.to_json(),
            "pass_hat_k": self.pass_hat_k.to_json(),
            "pass_at_k": self.pass_at_k.to_json(),
            "k": self.k,
            "cases": self.cases,
            "trials": self.trials,
            "seed": self.seed,
        }


@dataclasses.dataclass(frozen=True)
class Planned:
    """`estimate` before its bootstraps: each metric's plan, and the bootstrap tickets of the
    metrics that need one (`resampling.Batch`)."""

    plans: dict[str, _Plan]
    tickets: dict[str, tuple[tuple[str, ...], int]]
    k: int
    cases: int
    trials: int


def plan_estimate(cases: CaseOutcomes, k: int, batch: resampling.Batch) -> Planned:
    """Plan pass@1, pass^k and pass@k, adding the bootstraps they need to `batch`; finish
    with `finish_estimate` once the batch has run."""
    return plan_tallies(dict(zip(cases, _tally(cases), strict=True)), k, batch)


def plan_tallies(
    tallied: Mapping[str, tuple[int, int]], k: int, batch: resampling.Batch
) -> Planned:
    """`plan_estimate` from each case's (n_i, c_i), for a caller that has counted them."""
    k = _check_k(k)
    largest = max((n for n, _ in tallied.values()), default=0)
    short = f"no case has {_trials(k)} (k={k}); " + (
        "there are no cases" if not tallied else f"the largest n is {largest}"
    )
    estimators = {
        "pass_at_1": (1, _pass_at_1_case, "no case has a scored trial"),
        "pass_hat_k": (k, _pass_hat_k_case(k), short),
        "pass_at_k": (k, _pass_at_k_case(k), short),
    }
    ordered = sorted(tallied)
    plans: dict[str, _Plan] = {}
    tickets: dict[str, tuple[tuple[str, ...], int]] = {}
    for name, (min_n, estimator, missing) in estimators.items():
        ids = tuple(case for case in ordered if tallied[case][0] >= min_n)
        # Cases share few distinct (n, c): each one's value is worked out once.
        values = {tally: estimator(*tally) for tally in set(tallied.values()) if tally[0] >= min_n}
        plan = _Plan(min_n, missing, tuple(values[tallied[case]] for case in ids))
        plans[name] = plan
        # Each metric's bootstrap starts from the batch's seed, so metrics over the same
        # cases resample them alike: their distributions come from one pass over the draws.
        if plan.bootstrapped:
            tickets[name] = batch.add(ids, plan.fractions)
    return Planned(plans, tickets, k, len(tallied), sum(n for n, _ in tallied.values()))


def finish_estimate(planned: Planned, batch: resampling.Batch) -> Estimates:
    metrics = {
        name: _metric(
            plan,
            batch.distribution(planned.tickets[name]) if name in planned.tickets else None,
        )
        for name, plan in planned.plans.items()
    }
    return Estimates(
        pass_at_1=metrics["pass_at_1"],
        pass_hat_k=metrics["pass_hat_k"],
        pass_at_k=metrics["pass_at_k"],
        k=planned.k,
        cases=planned.cases,
        trials=planned.trials,
        seed=batch.seed,
    )


def estimate(
    cases: CaseOutcomes,
    k: int,
    *,
    seed: int,
    resamples: int = DEFAULT_RESAMPLES,
    method: int = resampling.V1,
) -> Estimates:
    """pass@1, pass^k and pass@k with bootstrap intervals and clustered standard errors.

    Each metric's bootstrap starts from `seed`, so a metric's interval does not change when
    another metric is added or removed. `method` is the bootstrap's version (`resampling`).
    """
    batch = resampling.Batch(resampling.check_version(method), seed, resamples)
    planned = plan_estimate(cases, k, batch)
    batch.run()
    return finish_estimate(planned, batch)


def summarize(
    cases: CaseOutcomes, k: int, *, seed: int, resamples: int = DEFAULT_RESAMPLES
) -> dict[str, Any]:
    """`estimate`'s numbers as JSON (no tuples, no NaN), as `examhall stats --json` prints them."""
    return estimate(cases, k, seed=seed, resamples=resamples).to_json()
