"""Paired comparison of one candidate arm against the baseline arm (DESIGN.md, "Statistics").

Pure functions, no I/O: trials in, a `model.Comparison` out. A pair is (case, round): it
counts only when both arms have exactly one scored trial there. Anything else blocks the pair
with its reasons, and any blocked pair withholds the headline, because a lift computed over
the pairs that happened to survive can be an accident of which ones failed (an arm whose
harder cases crash more would look better).

The case is the unit of uncertainty, as in `estimates`: rounds of one case are correlated, so
the interval resamples whole cases and the standard error clusters by case.

Headline numbers, over the eligible pairs, for case i with R_i pairs:

- pass rate per arm: pass@1 over the arm's trials in eligible pairs (`estimates.pass_at_1`);
  with a complete design every case has the same R_i, so this is also the mean over pairs
- lift = candidate - baseline = mean_i d_i, d_i = (c_i - b_i) / R_i (passes in the pairs)
- 95% interval: an expanded percentile bootstrap over cases (`estimates.expanded_level`,
  seeded; plain percentiles run narrow with few cases), or Wilson bounds on the shares of
  wins and losses when every case has the same lift (`_lift_interval`)
- wins / ties / losses: pairs where only the candidate / both or neither / only the baseline
  passed; McNemar's exact mid-p on the discordant pairs (`mcnemar_midp`)
- minimum detectable effect at 80% power (`minimum_detectable_effect`)
- pass^k per arm (`estimates.pass_hat_k`) when rounds >= k
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import reduce
from operator import add
from statistics import NormalDist
from typing import Protocol

from service.domain.status import Outcome, TrialStatus
from service.report import resampling
from service.report.estimates import (
    DEFAULT_RESAMPLES,
    CaseOutcomes,
    expanded_level,
    pass_at_1,
    pass_hat_k,
    percentile_interval,
    stderr_of_case_values,
    wilson_interval,
)
from service.report.model import (
    TELEMETRY,
    ArmPassHatK,
    ArmTotals,
    BlockedPair,
    Comparison,
    Delta,
    Deltas,
    DeltaUnavailable,
    Flag,
    FlakyCases,
    Headline,
    PairOrder,
    Total,
    TotalUnavailable,
)
from service.report.outcomes import verdict

# Two-sided alpha 0.05 and 80% power: z_.975 + z_.80 = 1.95996 + 0.84162 = 2.80158.
_Z_ALPHA = NormalDist().inv_cdf(0.975)
_Z_POWER = NormalDist().inv_cdf(0.80)

FLAGS: tuple[Flag, ...] = (
    "control-saturated",
    "flaky",
    "negative-delta",
    "no-lift",
    "treatment-saturated",
)


@dataclass(frozen=True)
class ArmTrial:
    """The final attempt of one planned trial (earlier attempts are not scored)."""

    case_id: str
    round: int
    variant: str
    order: int
    status: str  # queued | running | finished
    outcome: str | None  # passed | failed | error
    error_kind: str | None
    input_tokens: int | None = None
    output_tokens: int | None = None
    tool_calls: int | None = None
    latency_s: float | None = None
    cost_usd: float | None = None  # None when the model has no price
    system_prompt_sha256: str | None = None


class Scored(Protocol):
    """What the comparison reads of a trial: `ArmTrial`, or any record with these fields
    (the report passes its own trial records rather than copy every one into an ArmTrial)."""

    @property
    def case_id(self) -> str: ...
    @property
    def round(self) -> int: ...
    @property
    def variant(self) -> str: ...
    @property
    def order(self) -> int: ...
    @property
    def status(self) -> str: ...
    @property
    def outcome(self) -> str | None: ...
    @property
    def error_kind(self) -> str | None: ...
    @property
    def input_tokens(self) -> int | None: ...
    @property
    def output_tokens(self) -> int | None: ...
    @property
    def tool_calls(self) -> int | None: ...
    @property
    def latency_s(self) -> float | None: ...
    @property
    def cost_usd(self) -> float | None: ...
    @property
    def system_prompt_sha256(self) -> str | None: ...


@dataclass(frozen=True)
class _Pair:
    case: str
    round: int
    baseline: Scored
    candidate: Scored
    baseline_passed: bool
    candidate_passed: bool


# --- statistics --------------------------------------------------------------------------


def mcnemar_midp(wins: int, losses: int) -> float:
    """Exact two-sided McNemar mid-p on the discordant pairs; 1.0 when there are none.

    Under no effect each discordant pair is a win or a loss with probability 1/2, so with
    n = wins + losses and m = min(wins, losses), X ~ Bin(n, 1/2):

        mid-p = min(1, 2 (P(X < m) + P(X = m) / 2))

    The mid-p counts only half the probability of the observed table, which removes most of
    the exact test's conservatism for small n (Fagerland et al. 2013 recommend it). Computed
    in integers over 2^n and rounded once, so it is exact for any n.
    """
    for name, number in (("wins", wins), ("losses", losses)):
        if isinstance(number, bool) or not isinstance(number, int) or number < 0:
            raise ValueError(f"{name} must be a non-negative integer, got {number!r}")
    n = wins + losses
    if n == 0:
        return 1.0
    m = min(wins, losses)
    # 2 (S + C/2) = 2 S + C with S = sum_{j<m} C(n, j) and C = C(n, m), all over 2^n.
    # Each C(n, j) comes from the last by the exact C(n, j+1) = C(n, j) (n - j) / (j + 1):
    # the same integers as math.comb's, without computing m binomials of n-bit numbers afresh.
    below, term = 0, 1
    for j in range(m):
        below += term
        term = term * (n - j) // (j + 1)
    numerator = 2 * below + term
    return min(1.0, numerator / (1 << n))


def minimum_detectable_effect(
    case_differences: Sequence[float], *, discordant: int, pairs: int
) -> float | None:
    """Smallest true lift (as a fraction) this design detects with 80% power; None under 2 cases.

    The test is the two-sided level-0.05 Wald test of lift = 0 with the case-clustered
    standard error SE of the paired difference: SE = sd(d_i) / sqrt(N) over the N cases'
    mean differences d_i (`estimates.stderr_of_case_values`, CR1). A true lift delta is
    detected when the estimate lands beyond z_.975 SE, so power(delta) ~ Phi(delta/SE -
    z_.975) and 80% power needs

        MDE = (z_.975 + z_.80) SE = 2.8016 SE

    (the opposite tail adds Phi(-2.8 - 1.96) < 1e-6 to the power, and is left out).

    When the observed SE is 0 (every case has the same difference, e.g. all ties), it says
    nothing about the design's noise, and 0 would claim any lift is detectable. Then SE is
    bounded instead: a pair's difference is -1, 0 or 1, so Var(pair) = p_disc - lift^2 <=
    p_disc, the share of discordant pairs, and a case's mean over its rounds varies no more
    than one pair does, so SE <= sqrt(p_disc / N). p_disc is replaced by the upper end of
    its 95% Wilson interval over the pairs, so 0 discordant pairs still give a positive,
    conservative MDE.
    """
    if len(case_differences) < 2:
        return None
    stderr = stderr_of_case_values(case_differences)
    if stderr is None or stderr == 0:
        interval = wilson_interval(discordant, pairs, z=_Z_ALPHA)
        if interval is None:
            return None
        stderr = math.sqrt(interval[1] / len(case_differences))
    # A lift cannot pass 100 pp; a larger MDE only says this design cannot detect any.
    return min(1.0, (_Z_ALPHA + _Z_POWER) * stderr)


def _same_lift_interval(wins: int, losses: int, pairs: int) -> tuple[tuple[float, float], str]:
    """When every case has the same difference the bootstrap can only return that point,
    which would claim certainty; then the bounds come from Wilson intervals on the shares of
    wins and of losses among the pairs."""
    win = wilson_interval(wins, pairs)
    loss = wilson_interval(losses, pairs)
    assert win is not None and loss is not None
    low, high = max(-1.0, win[0] - loss[1]), min(1.0, win[1] - loss[0])
    return (low, high), "Wilson bounds on wins and losses (every case had the same lift)"


_BOOTSTRAP_METHOD = "expanded percentile bootstrap over cases"


def _lift_distribution_v1(
    base_cases: Mapping[str, list[bool]],
    cand_cases: Mapping[str, list[bool]],
    seed: int,
    resamples: int,
) -> list[float]:
    """Version 1's lift distribution: `estimates.bootstrap_ci` with `_lift_statistic`, to
    the last bit: the same draws, and each resample's lift summed in the same order, but
    every case's lift worked out once rather than once per resample."""
    joined = _joined(base_cases, cand_cases)
    lifts = [_lift_statistic({case: joined[case]}) for case in sorted(joined)]
    return [
        reduce(add, map(lifts.__getitem__, picks), 0.0) / len(picks)
        for picks in resampling.case_resamples(len(lifts), seed=seed, resamples=resamples)
    ]


def _lift_statistic(sample: CaseOutcomes) -> float | None:
    """The lift of a bootstrap resample; see `_joined` for how a case's pairs are stored."""
    total = 0.0
    for joined in sample.values():
        rounds = len(joined) // 2
        total += (sum(joined[rounds:]) - sum(joined[:rounds])) / rounds
    return total / len(sample)


def _joined(
    baseline: Mapping[str, list[bool]], candidate: Mapping[str, list[bool]]
) -> CaseOutcomes:
    """Each case's pairs as one outcome list: baseline outcomes, then candidate outcomes.

    This lets the paired bootstrap reuse `estimates.bootstrap_ci`, which resamples whole cases
    and hands the statistic their outcome lists. The lift needs only each case's pass
    counts per arm over its R_i pairs, and both halves have length R_i, so nothing is lost.
    """
    return {case: baseline[case] + candidate[case] for case in baseline}


# --- pairing -----------------------------------------------------------------------------


def _verdict(trial: Scored) -> bool | None:
    return verdict(trial.status, trial.outcome, trial.error_kind)


# A provider error (a rate limit, a context overflow) says little about the arm and hits the
# arm with the longer prompt more often; in a comparison it blocks the pair, as any run error
# does in pi-evals, rather than count as a quiet loss. Single-arm rates still count it failed.
BLOCKS_PAIRS = frozenset({"provider_error"})
_FINISHED = TrialStatus.FINISHED  # looked up once: `_side` runs for every pair


def _side(variant: str, found: Sequence[Scored]) -> tuple[Scored, bool] | str:
    """The one scored trial of an arm in a pair, or why there is none."""
    if not found:
        return f"{variant}: missing (no trial)"
    if len(found) > 1:
        return f"{variant}: duplicated (expected 1 run, found {len(found)})"
    trial = found[0]
    if trial.error_kind in BLOCKS_PAIRS:
        return f"{variant}: errored ({trial.error_kind})"
    verdict = _verdict(trial)
    if verdict is not None:
        return trial, verdict
    if trial.status != _FINISHED:
        return f"{variant}: unscored ({trial.status})"
    if trial.error_kind:
        return f"{variant}: errored ({trial.error_kind})"
    if trial.outcome == Outcome.ERROR:
        return f"{variant}: errored (no error kind)"
    return f"{variant}: unscored (finished with outcome {trial.outcome!r})"


# --- telemetry ---------------------------------------------------------------------------


def _measured(value: float | None) -> float | None:
    # A negative or non-finite reading is a broken meter, not a measurement: averaging it
    # would poison the mean (and NaN is not JSON), so it counts as not measured.
    if value is None or isinstance(value, bool) or not math.isfinite(value) or value < 0:
        return None
    return value


def _tokens(trial: Scored) -> float | None:
    # Both halves or nothing: input tokens alone would undercount and look like a saving.
    tokens_in, tokens_out = _measured(trial.input_tokens), _measured(trial.output_tokens)
    return None if tokens_in is None or tokens_out is None else tokens_in + tokens_out


_READ: dict[str, Callable[[Scored], float | None]] = {
    "tokens": _tokens,
    "tool_calls": lambda t: _measured(t.tool_calls),
    "latency_s": lambda t: _measured(t.latency_s),
    "cost_usd": lambda t: _measured(t.cost_usd),
}
assert tuple(_READ) == TELEMETRY


def _sum(values: Sequence[float]) -> float:
    # Token and tool-call counts stay integers; fsum rounds a float sum once.
    if all(isinstance(v, int) for v in values):
        return sum(values)
    return math.fsum(values)


def _delta(
    pairs: Sequence[_Pair], read: Callable[[Scored], float | None]
) -> Delta | DeltaUnavailable:
    both = [
        (b, c)
        for b, c in ((read(p.baseline), read(p.candidate)) for p in pairs)
        if b is not None and c is not None
    ]
    coverage = f"{len(both)}/{len(pairs)} pairs measured"
    if not both:
        return DeltaUnavailable(mean_delta=None, status="unavailable", coverage=coverage)
    m = len(both)
    return Delta(
        mean_delta=_sum([c - b for b, c in both]) / m,
        candidate_mean=_sum([c for _, c in both]) / m,
        baseline_mean=_sum([b for b, _ in both]) / m,
        pairs_measured=m,
        coverage=coverage,
    )


def _total(
    trials: Sequence[Scored], read: Callable[[Scored], float | None]
) -> Total | TotalUnavailable:
    values = [v for v in (read(t) for t in trials) if v is not None]
    coverage = f"{len(values)}/{len(trials)} trials measured"
    if not values:
        return TotalUnavailable(total=None, status="unavailable", coverage=coverage)
    return Total(total=_sum(values), trials_measured=len(values), coverage=coverage)


def _deltas(pairs: Sequence[_Pair]) -> Deltas:
    return Deltas(**{name: _delta(pairs, read) for name, read in _READ.items()})


def _totals(trials: Sequence[Scored]) -> ArmTotals:
    # Every trial of the arm in the design counts, blocked or not: errored and duplicated
    # runs still spent tokens and money.
    return ArmTotals(
        trials=len(trials), **{name: _total(trials, read) for name, read in _READ.items()}
    )


# --- the comparison ----------------------------------------------------------------------


def _blocked_text(count: int) -> str:
    return "1 pair is blocked" if count == 1 else f"{count} pairs are blocked"


def _check_int(name: str, value: object, minimum: int | None) -> None:
    # bool is an int subclass; `rounds=True` is a bug, not a design of one round.
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")


def _pass_hat_k(
    baseline: Mapping[str, list[bool]],
    candidate: Mapping[str, list[bool]],
    *,
    rounds: int,
    k: int,
) -> tuple[ArmPassHatK, str | None]:
    if rounds < k:
        reason = f"pass^{k} needs at least {k} rounds per case; this design has {rounds}"
        if rounds == 1:
            reason = "one repetition cannot establish stability: " + reason
        return ArmPassHatK(baseline=None, candidate=None), reason
    values = ArmPassHatK(baseline=pass_hat_k(baseline, k), candidate=pass_hat_k(candidate, k))
    missing = [arm for arm in ("baseline", "candidate") if getattr(values, arm) is None]
    if missing:
        return values, f"no case has {k} eligible pairs for {' and '.join(missing)}"
    return values, None


def compare(
    trials: Sequence[Scored],
    *,
    baseline: str,
    candidate: str,
    cases: Sequence[str],
    rounds: int,
    k: int,
    seed: int,
    resamples: int = DEFAULT_RESAMPLES,
    attempts: Sequence[Scored] | None = None,
    method: int = resampling.V1,
) -> Comparison:
    """The paired comparison of `candidate` against `baseline`.

    `method` is the bootstrap's version (`resampling`); `seed` and `resamples` are its own.

    `attempts`, when given, is every attempt including retried ones: the operational totals
    count them all, since a retried attempt still spent tokens and time.

    `trials` are final attempts (`build.final_attempts`); trials of other variants, of cases
    not in `cases` or of rounds outside 1..rounds are outside this design and ignored.
    """
    if baseline == candidate:
        raise ValueError(f"the candidate must differ from the baseline, both are {baseline!r}")
    if len(set(cases)) != len(cases):
        raise ValueError("cases must not repeat")
    _check_int("rounds", rounds, 0)
    _check_int("k", k, 1)
    _check_int("seed", seed, None)
    _check_int("resamples", resamples, 1)
    batch = resampling.Batch(resampling.check_version(method), seed, resamples)
    finish = plan_compare(
        trials,
        baseline=baseline,
        candidate=candidate,
        cases=cases,
        rounds=rounds,
        k=k,
        batch=batch,
        attempts=attempts,
    )
    batch.run()
    return finish()


def plan_compare(
    trials: Sequence[Scored],
    *,
    baseline: str,
    candidate: str,
    cases: Sequence[str],
    rounds: int,
    k: int,
    batch: resampling.Batch,
    attempts: Sequence[Scored] | None = None,
) -> Callable[[], Comparison]:
    """`compare` in two steps: everything but the lift's bootstrap, which it adds to
    `batch` (with version 2, so the arms' rates and the lift share their draws where they
    resample the same cases); the function it returns makes the comparison once the batch
    has run. The arguments are `compare`'s, checked there."""
    seed, resamples = batch.seed, batch.resamples

    known = set(cases)
    slots: dict[tuple[str, int, str], list[Scored]] = defaultdict(list)
    by_arm: dict[str, list[Scored]] = {baseline: [], candidate: []}
    for trial in trials:
        if trial.variant in by_arm and trial.case_id in known and 1 <= trial.round <= rounds:
            slots[(trial.case_id, trial.round, trial.variant)].append(trial)
            by_arm[trial.variant].append(trial)

    pairs: list[_Pair] = []
    blocked: list[BlockedPair] = []
    order: list[PairOrder] = []
    for case in cases:
        for round_ in range(1, rounds + 1):
            found_b = slots.get((case, round_, baseline), [])
            found_c = slots.get((case, round_, candidate), [])
            first = None
            if found_b and found_c:
                first_b = min(t.order for t in found_b)
                first_c = min(t.order for t in found_c)
                first = baseline if first_b < first_c else candidate
            order.append(PairOrder(case=case, round=round_, first=first))
            side_b, side_c = _side(baseline, found_b), _side(candidate, found_c)
            if isinstance(side_b, str) or isinstance(side_c, str):
                reasons = [side for side in (side_b, side_c) if isinstance(side, str)]
                blocked.append(BlockedPair(case=case, round=round_, reasons=reasons))
                continue
            pairs.append(_Pair(case, round_, side_b[0], side_c[0], side_b[1], side_c[1]))

    # Per-case outcomes over eligible pairs, in round order, cases in design order.
    base_cases: dict[str, list[bool]] = {}
    cand_cases: dict[str, list[bool]] = {}
    for pair in pairs:
        base_cases.setdefault(pair.case, []).append(pair.baseline_passed)
        cand_cases.setdefault(pair.case, []).append(pair.candidate_passed)

    flaky = FlakyCases(
        baseline=[c for c, runs in base_cases.items() if len(set(runs)) == 2],
        candidate=[c for c, runs in cand_cases.items() if len(set(runs)) == 2],
    )
    flags: set[Flag] = set()
    if flaky.baseline or flaky.candidate:
        flags.add("flaky")

    # The headline's parts that need no bootstrap. A blocked pair withholds the headline,
    # so its lift is not bootstrapped at all.
    lift_ticket: tuple[tuple[str, ...], int] | None = None
    case_diffs: list[Fraction] = []
    wins = losses = 0
    if pairs:
        # Exact, so "no-lift" means exactly zero, not a float that happened to cancel.
        case_diffs = [
            Fraction(sum(cand_cases[c]) - sum(base_cases[c]), len(base_cases[c]))
            for c in base_cases
        ]
        wins = sum(1 for p in pairs if p.candidate_passed and not p.baseline_passed)
        losses = sum(1 for p in pairs if p.baseline_passed and not p.candidate_passed)
        bootstrapped = len(case_diffs) >= 2 and len(set(case_diffs)) > 1
        if bootstrapped and not blocked and batch.version != resampling.V1:
            # Each case's lift as an exact fraction, cases in id order like the arms' own
            # columns, so the same cases share one draw matrix.
            ordered = sorted(base_cases)
            lift_ticket = batch.add(
                tuple(ordered),
                [(sum(cand_cases[c]) - sum(base_cases[c]), len(base_cases[c])) for c in ordered],
            )

    def lift_interval() -> tuple[tuple[float, float] | None, str | None]:
        """The lift's 95% interval and how it was made: an expanded percentile bootstrap
        over cases (plain percentiles run narrow with few cases), or Wilson bounds when
        every case has the same lift (`_same_lift_interval`)."""
        if len(case_diffs) < 2:
            return None, None
        if len(set(case_diffs)) == 1:
            return _same_lift_interval(wins, losses, len(pairs))
        if lift_ticket is not None:
            values = batch.distribution(lift_ticket)
        else:
            values = _lift_distribution_v1(base_cases, cand_cases, seed, resamples)
        return percentile_interval(values, expanded_level(len(case_diffs))), _BOOTSTRAP_METHOD

    def finish() -> Comparison:
        return _comparison(
            pairs,
            blocked,
            lift_interval if pairs and not blocked else None,
            case_diffs,
            wins,
            losses,
            base_cases=base_cases,
            cand_cases=cand_cases,
            flags=flags,
            flaky=flaky,
            baseline=baseline,
            candidate=candidate,
            cases=cases,
            known=known,
            rounds=rounds,
            k=k,
            seed=seed,
            resamples=resamples,
            order=order,
            trials=trials,
            attempts=attempts,
        )

    return finish


def _comparison(
    pairs: Sequence[_Pair],
    blocked: list[BlockedPair],
    lift_interval: Callable[[], tuple[tuple[float, float] | None, str | None]] | None,
    case_diffs: Sequence[Fraction],
    wins: int,
    losses: int,
    *,
    base_cases: dict[str, list[bool]],
    cand_cases: dict[str, list[bool]],
    flags: set[Flag],
    flaky: FlakyCases,
    baseline: str,
    candidate: str,
    cases: Sequence[str],
    known: set[str],
    rounds: int,
    k: int,
    seed: int,
    resamples: int,
    order: list[PairOrder],
    trials: Sequence[Scored],
    attempts: Sequence[Scored] | None,
) -> Comparison:
    headline: Headline | None = None
    if pairs and lift_interval is not None:
        base_rate = pass_at_1(base_cases)
        cand_rate = pass_at_1(cand_cases)
        assert base_rate is not None and cand_rate is not None  # every case has a pair
        lift = sum(case_diffs, Fraction(0)) / len(case_diffs)
        if lift == 0:
            flags.add("no-lift")
        elif lift < 0:
            flags.add("negative-delta")
        if base_rate == 1.0:
            flags.add("control-saturated")
        if cand_rate == 1.0:
            flags.add("treatment-saturated")
        interval, method = lift_interval()
        mde = minimum_detectable_effect(
            [float(d) for d in case_diffs], discordant=wins + losses, pairs=len(pairs)
        )
        hat_k, hat_k_reason = _pass_hat_k(base_cases, cand_cases, rounds=rounds, k=k)
        headline = Headline(
            cases=len(base_cases),
            baseline_pass_rate=base_rate,
            candidate_pass_rate=cand_rate,
            lift_pp=float(100 * lift),
            lift_ci95_pp=None if interval is None else [100 * interval[0], 100 * interval[1]],
            lift_ci95_reason=(
                None if interval is not None else "the interval needs at least 2 cases"
            ),
            lift_ci95_method=method,
            seed=seed,
            resamples=resamples,
            wins=wins,
            ties=len(pairs) - wins - losses,
            losses=losses,
            mcnemar_midp=mcnemar_midp(wins, losses),
            mcnemar_note=(
                "the rounds of one case are not independent pairs, so with several rounds "
                "this p-value is optimistic; the case-level interval is the safer guide"
                if rounds > 1
                else None
            ),
            mde_pp=None if mde is None else 100 * mde,
            mde_reason=None if mde is not None else "the MDE needs at least 2 cases",
            k=k,
            pass_hat_k=hat_k,
            pass_hat_k_reason=hat_k_reason,
        )
    withheld: str | None = None
    if blocked:
        withheld = f"withheld because {_blocked_text(len(blocked))}"
    elif not pairs:
        withheld = "withheld because the design has no pairs"
    if withheld is not None:
        # The verdict flags read like a conclusion; only `flaky`, a fact about single cases,
        # survives a withheld headline (as in pi-evals).
        flags &= {"flaky"}

    return Comparison(
        baseline=baseline,
        candidate=candidate,
        pairs_total=len(cases) * rounds,
        pairs_eligible=len(pairs),
        blocked=blocked,
        headline=headline,
        withheld_reason=withheld,
        flags=sorted(flags),
        flaky_cases=flaky,
        deltas=_deltas(pairs),
        totals={
            arm: _totals(
                [
                    t
                    for t in (attempts or trials)
                    if t.variant == arm and t.case_id in known and 1 <= t.round <= rounds
                ]
            )
            for arm in (baseline, candidate)
        },
        order=order,
        system_prompt_sha256={
            arm: sorted(
                {
                    t.system_prompt_sha256
                    for t in trials
                    if t.variant == arm and t.system_prompt_sha256
                }
            )
            for arm in (baseline, candidate)
        },
    )
