"""Paired comparison of one candidate arm against the baseline arm (docs/reference/statistics.md).

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
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import reduce
from operator import add
from statistics import NormalDist
from typing import Protocol

import numpy as np

from service.domain.status import Outcome, TrialStatus
from service.report import resampling
from service.report.columns import Bools, Columns, Ints, Measured, sum_values
from service.report.estimates import (
    DEFAULT_RESAMPLES,
    expanded_level,
    pass_at_1_of,
    pass_hat_k_of,
    percentile_interval,
    stderr_of_case_values,
    wilson_interval,
)
from service.report.model import (
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


def _lift_distribution_v1(lifts: Sequence[float], seed: int, resamples: int) -> list[float]:
    """Version 1's lift distribution from each case's lift (cases in id order):
    `estimates.bootstrap_ci` with the lift of a resample as the mean of its cases' lifts, to
    the last bit: the same draws, and each resample's lift summed in the same order, but
    every case's lift worked out once rather than once per resample."""
    return [
        reduce(add, map(lifts.__getitem__, picks), 0.0) / len(picks)
        for picks in resampling.case_resamples(len(lifts), seed=seed, resamples=resamples)
    ]


# --- pairing -----------------------------------------------------------------------------


# A provider error (a rate limit, a context overflow) says little about the arm and hits the
# arm with the longer prompt more often; in a comparison it blocks the pair, as any run error
# does in pi-evals, rather than count as a quiet loss. Single-arm rates still count it failed.
BLOCKS_PAIRS = frozenset({"provider_error"})

# What the comparison reads of a record (`Scored`), as `Columns` names them.
_SCORED = (
    "case_id",
    "variant",
    "round",
    "order",
    "status",
    "outcome",
    "error_kind",
    "input_tokens",
    "output_tokens",
    "tool_calls",
    "latency_s",
    "system_prompt_sha256",
    "cost_usd",
)


def _reason(variant: str, table: Columns, found: int, row: int) -> str:
    """Why an arm's side of a pair has no scored trial: `found` trials are there, and
    `row` is the one when there is one."""
    if not found:
        return f"{variant}: missing (no trial)"
    if found > 1:
        return f"{variant}: duplicated (expected 1 run, found {found})"
    error_kind = table.error_kind.values[table.error_kind.codes[row]]
    status = table.status.values[table.status.codes[row]]
    outcome = table.outcome.values[table.outcome.codes[row]]
    if error_kind in BLOCKS_PAIRS:
        return f"{variant}: errored ({error_kind})"
    if status != TrialStatus.FINISHED:
        return f"{variant}: unscored ({status})"
    if error_kind:
        return f"{variant}: errored ({error_kind})"
    if outcome == Outcome.ERROR:
        return f"{variant}: errored (no error kind)"
    return f"{variant}: unscored (finished with outcome {outcome!r})"


@dataclass(frozen=True)
class _Pairs:
    """The design's pairs: slot 2p is pair p's baseline side, 2p + 1 its candidate's; pair p
    is case p // rounds (in design order), round p % rounds + 1."""

    found: Ints  # trials in each slot
    first_order: Ints  # the smallest plan position in each slot
    row: Ints  # the slot's trial, where it holds exactly one
    scored: Bools  # the slot has one trial, scored, and not one that blocks the pair
    passed: Bools  # ... and it passed

    @property
    def eligible(self) -> Bools:
        return self.scored[0::2] & self.scored[1::2]


def _pairs(
    table: Columns, rows: Ints, arms: tuple[str, str], cases: Sequence[str], rounds: int
) -> _Pairs:
    position = {case: i for i, case in enumerate(cases)}
    of_code = np.array([position.get(v, -1) for v in table.case.values] or [-1])
    variant = table.variant.codes[rows]
    arm = np.full(len(rows), -1, dtype=np.int64)
    for side, name in enumerate(arms):
        if (code := table.variant.code(name)) >= 0:
            arm[variant == code] = side
    case = of_code[table.case.codes[rows]]
    round_ = table.round[rows]
    inside = (arm >= 0) & (case >= 0) & (round_ >= 1) & (round_ <= rounds)
    rows = rows[inside]
    slot = (case[inside] * rounds + round_[inside] - 1) * 2 + arm[inside]
    slots = len(cases) * rounds * 2
    found = np.bincount(slot, minlength=slots)
    first_order = np.full(slots, np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(first_order, slot, table.order[rows])
    row = np.zeros(slots, dtype=np.int64)
    row[slot] = rows
    blocks = table.error_kind.table(lambda kind: kind in BLOCKS_PAIRS)[table.error_kind.codes]
    verdicts = table.verdicts
    scored = (found == 1) & ~blocks[row] & (verdicts[row] >= 0) if len(table) else found > 0
    passed = scored & (verdicts[row] == 1) if len(table) else scored
    return _Pairs(found, first_order, row, scored, passed)


# --- telemetry ---------------------------------------------------------------------------


def _delta(read: Measured, baseline: Ints, candidate: Ints) -> Delta | DeltaUnavailable:
    both = read.measured[baseline] & read.measured[candidate]
    m = int(np.count_nonzero(both))
    coverage = f"{m}/{len(baseline)} pairs measured"
    if not m:
        return DeltaUnavailable(mean_delta=None, status="unavailable", coverage=coverage)
    b, c = baseline[both], candidate[both]
    integer = read.integer[b] & read.integer[c]
    difference = sum_values(integer, read.ints[c] - read.ints[b], read.real[c] - read.real[b])
    return Delta(
        mean_delta=difference / m,
        candidate_mean=read.total(c) / m,
        baseline_mean=read.total(b) / m,
        pairs_measured=m,
        coverage=coverage,
    )


def _total(read: Measured, rows: Ints) -> Total | TotalUnavailable:
    measured = rows[read.measured[rows]]
    coverage = f"{len(measured)}/{len(rows)} trials measured"
    if not len(measured):
        return TotalUnavailable(total=None, status="unavailable", coverage=coverage)
    return Total(total=read.total(measured), trials_measured=len(measured), coverage=coverage)


def _totals(table: Columns, rows: Ints) -> ArmTotals:
    # Every trial of the arm in the design counts, blocked or not: errored and duplicated
    # runs still spent tokens and money.
    return ArmTotals(
        trials=len(rows), **{name: _total(read, rows) for name, read in table.telemetry.items()}
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
    baseline: Sequence[tuple[int, int]],
    candidate: Sequence[tuple[int, int]],
    *,
    rounds: int,
    k: int,
) -> tuple[ArmPassHatK, str | None]:
    if rounds < k:
        reason = f"pass^{k} needs at least {k} rounds per case; this design has {rounds}"
        if rounds == 1:
            reason = "one repetition cannot establish stability: " + reason
        return ArmPassHatK(baseline=None, candidate=None), reason
    values = ArmPassHatK(baseline=pass_hat_k_of(baseline, k), candidate=pass_hat_k_of(candidate, k))
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

    `trials` are final attempts (`Columns.finals`); trials of other variants, of cases
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
        Columns.of_records(trials, _SCORED),
        baseline=baseline,
        candidate=candidate,
        cases=cases,
        rounds=rounds,
        k=k,
        batch=batch,
        attempts=None if attempts is None else Columns.of_records(attempts, _SCORED),
    )
    batch.run()
    return finish()


def plan_compare(
    table: Columns,
    *,
    baseline: str,
    candidate: str,
    cases: Sequence[str],
    rounds: int,
    k: int,
    batch: resampling.Batch,
    attempts: Columns | None = None,
    finals: Ints | None = None,
) -> Callable[[], Comparison]:
    """`compare` in two steps: everything but the lift's bootstrap, which it adds to
    `batch` (with version 2 the arms' rates and the lift share their draws where they
    resample the same cases; version 3 counts each column's values with a generator of its
    own); the function it returns makes the comparison once the batch
    has run. The arguments are `compare`'s, checked there; `finals` are the rows of `table`
    that are final attempts (all of them when None), and `attempts` every attempt (the
    final ones when None)."""
    seed, resamples = batch.seed, batch.resamples
    rows = np.arange(len(table), dtype=np.int64) if finals is None else finals
    pairs = _pairs(table, rows, (baseline, candidate), cases, rounds)
    eligible = np.flatnonzero(pairs.eligible)
    blocked_pairs = np.flatnonzero(~pairs.eligible)

    # Per-case tallies over eligible pairs, cases in design order.
    pair_case = eligible // rounds if rounds else eligible
    base_passed = pairs.passed[2 * eligible]
    cand_passed = pairs.passed[2 * eligible + 1]
    pairs_of = np.bincount(pair_case, minlength=len(cases))
    base_wins = np.bincount(pair_case[base_passed], minlength=len(cases))
    cand_wins = np.bincount(pair_case[cand_passed], minlength=len(cases))
    used = np.flatnonzero(pairs_of)
    names = [cases[i] for i in used.tolist()]
    counts = pairs_of[used].tolist()
    base_tallies = list(zip(counts, base_wins[used].tolist(), strict=True))
    cand_tallies = list(zip(counts, cand_wins[used].tolist(), strict=True))

    flaky = FlakyCases(
        baseline=[case for case, (n, c) in zip(names, base_tallies, strict=True) if 0 < c < n],
        candidate=[case for case, (n, c) in zip(names, cand_tallies, strict=True) if 0 < c < n],
    )
    flags: set[Flag] = set()
    if flaky.baseline or flaky.candidate:
        flags.add("flaky")

    # The headline's parts that need no bootstrap. A blocked pair withholds the headline,
    # so its lift is not bootstrapped at all.
    lift_ticket: tuple[tuple[str, ...], int] | None = None
    # Each case's lift, (candidate passes - baseline passes, pairs): exact, so "no-lift"
    # means exactly zero, not a float that happened to cancel.
    lifts = [(c - b, n) for (n, b), (_, c) in zip(base_tallies, cand_tallies, strict=True)]
    distinct = {Fraction(*lift) for lift in set(lifts)}
    wins = int(np.count_nonzero(cand_passed & ~base_passed))
    losses = int(np.count_nonzero(base_passed & ~cand_passed))
    bootstrapped = len(lifts) >= 2 and len(distinct) > 1
    by_id = sorted(range(len(names)), key=names.__getitem__)
    if bootstrapped and not len(blocked_pairs) and batch.version != resampling.V1:
        # Cases in id order like the arms' own columns, so the same cases share one draw
        # matrix.
        lift_ticket = batch.add(tuple(names[i] for i in by_id), [lifts[i] for i in by_id])

    def lift_interval() -> tuple[tuple[float, float] | None, str | None]:
        """The lift's 95% interval and how it was made: an expanded percentile bootstrap
        over cases (plain percentiles run narrow with few cases), or Wilson bounds when
        every case has the same lift (`_same_lift_interval`)."""
        if len(lifts) < 2:
            return None, None
        if len(distinct) == 1:
            return _same_lift_interval(wins, losses, len(eligible))
        if lift_ticket is not None:
            values = batch.distribution(lift_ticket)
        else:
            values = _lift_distribution_v1(
                [lifts[i][0] / lifts[i][1] for i in by_id], seed, resamples
            )
        return percentile_interval(values, expanded_level(len(lifts))), _BOOTSTRAP_METHOD

    def finish() -> Comparison:
        return _comparison(
            table,
            pairs,
            eligible,
            blocked_pairs,
            lift_interval if len(eligible) and not len(blocked_pairs) else None,
            lifts,
            wins,
            losses,
            base_tallies=base_tallies,
            cand_tallies=cand_tallies,
            flags=flags,
            flaky=flaky,
            baseline=baseline,
            candidate=candidate,
            cases=cases,
            rounds=rounds,
            k=k,
            seed=seed,
            resamples=resamples,
            finals=rows,
            attempts=attempts,
        )

    return finish


def _exact_lift(lifts: Sequence[tuple[int, int]]) -> Fraction:
    """The mean of the cases' lifts, exactly: over a common denominator, one Fraction."""
    common = math.lcm(*(n for _, n in lifts))
    return Fraction(sum(d * (common // n) for d, n in lifts), common * len(lifts))


def _comparison(
    table: Columns,
    pairs: _Pairs,
    eligible: Ints,
    blocked_pairs: Ints,
    lift_interval: Callable[[], tuple[tuple[float, float] | None, str | None]] | None,
    lifts: Sequence[tuple[int, int]],
    wins: int,
    losses: int,
    *,
    base_tallies: Sequence[tuple[int, int]],
    cand_tallies: Sequence[tuple[int, int]],
    flags: set[Flag],
    flaky: FlakyCases,
    baseline: str,
    candidate: str,
    cases: Sequence[str],
    rounds: int,
    k: int,
    seed: int,
    resamples: int,
    finals: Ints,
    attempts: Columns | None,
) -> Comparison:
    headline: Headline | None = None
    if len(eligible) and lift_interval is not None:
        base_rate = pass_at_1_of(base_tallies)
        cand_rate = pass_at_1_of(cand_tallies)
        assert base_rate is not None and cand_rate is not None  # every case has a pair
        lift = _exact_lift(lifts)
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
            [d / n for d, n in lifts], discordant=wins + losses, pairs=len(eligible)
        )
        hat_k, hat_k_reason = _pass_hat_k(base_tallies, cand_tallies, rounds=rounds, k=k)
        headline = Headline(
            cases=len(base_tallies),
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
            ties=len(eligible) - wins - losses,
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
    if len(blocked_pairs):
        withheld = f"withheld because {_blocked_text(len(blocked_pairs))}"
    elif not len(eligible):
        withheld = "withheld because the design has no pairs"
    if withheld is not None:
        # The verdict flags read like a conclusion; only `flaky`, a fact about single cases,
        # survives a withheld headline (as in pi-evals).
        flags &= {"flaky"}

    base_rows = pairs.row[2 * eligible]
    cand_rows = pairs.row[2 * eligible + 1]
    spent = table if attempts is None else attempts
    spent_rows = finals if attempts is None else np.arange(len(attempts), dtype=np.int64)
    return Comparison(
        baseline=baseline,
        candidate=candidate,
        pairs_total=len(cases) * rounds,
        pairs_eligible=len(eligible),
        blocked=_blocked(table, pairs, blocked_pairs, (baseline, candidate), cases, rounds),
        headline=headline,
        withheld_reason=withheld,
        flags=sorted(flags),
        flaky_cases=flaky,
        deltas=Deltas(
            **{name: _delta(read, base_rows, cand_rows) for name, read in table.telemetry.items()}
        ),
        totals={
            arm: _totals(spent, _design_rows(spent, spent_rows, arm, cases, rounds))
            for arm in (baseline, candidate)
        },
        order=_order(pairs, (baseline, candidate), cases, rounds),
        system_prompt_sha256={arm: _prompts(table, finals, arm) for arm in (baseline, candidate)},
    )


def _blocked(
    table: Columns,
    pairs: _Pairs,
    blocked: Ints,
    arms: tuple[str, str],
    cases: Sequence[str],
    rounds: int,
) -> list[BlockedPair]:
    found, row, scored = pairs.found.tolist(), pairs.row.tolist(), pairs.scored.tolist()
    return [
        BlockedPair(
            case=cases[pair // rounds],
            round=pair % rounds + 1,
            reasons=[
                _reason(arm, table, found[slot], row[slot])
                for arm, slot in zip(arms, (2 * pair, 2 * pair + 1), strict=True)
                if not scored[slot]
            ],
        )
        for pair in blocked.tolist()
    ]


def _order(
    pairs: _Pairs, arms: tuple[str, str], cases: Sequence[str], rounds: int
) -> list[PairOrder]:
    """Which arm ran first in each pair (by plan position), None unless both ran."""
    both = (pairs.found[0::2] > 0) & (pairs.found[1::2] > 0)
    base_first = pairs.first_order[0::2] < pairs.first_order[1::2]
    first = np.where(both, np.where(base_first, 0, 1), -1).tolist()
    names = (arms[0], arms[1], None)
    return [
        {"case": case, "round": round_, "first": names[first[i * rounds + round_ - 1]]}
        for i, case in enumerate(cases)
        for round_ in range(1, rounds + 1)
    ]


def _design_rows(table: Columns, rows: Ints, arm: str, cases: Sequence[str], rounds: int) -> Ints:
    """`rows` of `arm`'s trials in the design: its cases and rounds."""
    design = set(cases)
    known = table.case.table(lambda case: case in design)
    code = table.variant.code(arm)
    round_ = table.round[rows]
    inside = (
        (table.variant.codes[rows] == code)
        & known[table.case.codes[rows]]
        & (round_ >= 1)
        & (round_ <= rounds)
    )
    selected: Ints = rows[inside]
    return selected


def _prompts(table: Columns, rows: Ints, arm: str) -> list[str]:
    """The distinct system prompts of `arm`'s trials among `rows`."""
    prompts = table.system_prompt_sha256
    if prompts is None:
        return []
    codes = np.unique(prompts.codes[rows[table.variant.codes[rows] == table.variant.code(arm)]])
    return sorted({prompts.values[code] for code in codes.tolist() if prompts.values[code]})
