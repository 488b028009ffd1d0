"""Agreement between people's reviews and the judges: percent agreement, Cohen's kappa with
a 95% interval, the confusion counts and both pass rates, per judge and per variant; and
for each comparison whether the reviewed pairs move the way the judges say.

Kappa's interval is kappa +- 1.96 standard errors, the large-sample standard error of
Fleiss, Cohen and Everitt (1969, Psychological Bulletin 72(5), "Large sample standard
errors of kappa and weighted kappa"), clipped to [-1, 1]. It needs no resampling, so it is
the same on every run, and it is what statsmodels' `cohens_kappa` reports (the tests check
against it). With few reviewed trials it is approximate, and at perfect agreement (or
disagreement) its standard error is 0: the interval is then withheld with that reason
rather than shown as a single point.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from service.report.agreement_model import (
    Agreement,
    AgreementRow,
    Confusion,
    KappaView,
    LiftCheck,
)

Z95 = 1.959963984540054
INTERVAL_METHOD = (
    "kappa +- 1.96 x the asymptotic standard error of Fleiss, Cohen and Everitt (1969), "
    "clipped to [-1, 1]"
)
# Below this many reviewed trials a row's interval is a rough guide (see the note).
FEW = 30
POOLED = "all"


@dataclass(frozen=True)
class ReviewedTrial:
    """A reviewed trial: what its judges said and what the person said (their latest
    review)."""

    trial_id: str
    variant: str
    case_id: str
    round: int
    # The trial's verdict: passed (True) or failed (False; a scored error too).
    passed: bool
    # Each judge's name and whether it passed (score >= 1), in the trial's order.
    judges: tuple[tuple[str, bool], ...]
    human_pass: bool


@dataclass(frozen=True)
class Counts:
    """The 2x2 table: a = both pass, b = person pass / judge fail, c = person fail / judge
    pass, d = both fail."""

    a: int
    b: int
    c: int
    d: int

    @property
    def n(self) -> int:
        return self.a + self.b + self.c + self.d


def tally(pairs: Sequence[tuple[bool, bool]]) -> Counts:
    """Counts of (human pass, judge pass) pairs."""
    a = sum(1 for h, j in pairs if h and j)
    b = sum(1 for h, j in pairs if h and not j)
    c = sum(1 for h, j in pairs if not h and j)
    return Counts(a, b, c, len(pairs) - a - b - c)


def kappa(counts: Counts) -> KappaView:
    """Cohen's kappa of the table, its asymptotic standard error and 95% interval."""
    n = counts.n
    if n == 0:
        return KappaView(value=None, ci95=None, stderr=None, reason="no reviewed trial")
    p = [[counts.a / n, counts.b / n], [counts.c / n, counts.d / n]]
    rows = [p[0][0] + p[0][1], p[1][0] + p[1][1]]  # the person's pass, fail
    cols = [p[0][0] + p[1][0], p[0][1] + p[1][1]]  # the judge's pass, fail
    observed = p[0][0] + p[1][1]
    expected = rows[0] * cols[0] + rows[1] * cols[1]
    if expected >= 1.0:
        return KappaView(
            value=None,
            ci95=None,
            stderr=None,
            reason="the person and the judge each gave every reviewed trial the same verdict, "
            "so chance agreement is 100% and kappa is undefined",
        )
    value = (observed - expected) / (1 - expected)
    term_a = sum(p[i][i] * (1 - (rows[i] + cols[i]) * (1 - value)) ** 2 for i in (0, 1))
    term_b = (1 - value) ** 2 * sum(
        p[i][j] * (cols[i] + rows[j]) ** 2 for i in (0, 1) for j in (0, 1) if i != j
    )
    term_c = (value - expected * (1 - value)) ** 2
    # Rounding can leave a hair below zero where the variance is 0.
    variance = max(0.0, (term_a + term_b - term_c) / ((1 - expected) ** 2 * n))
    stderr = math.sqrt(variance)
    # Where the variance is 0 in exact arithmetic (one side gave every trial one verdict),
    # its terms of about 1 cancel to a rounding error near 1e-16, whose root is near 1e-8:
    # a standard error that small is that, not a measurement (a real one is of order 1/n,
    # and no review has a million trials).
    if stderr < 1e-6:
        return KappaView(
            value=value,
            ci95=None,
            stderr=0.0,
            reason=f"its asymptotic standard error is 0 on these {n} trials, which measures "
            "nothing: review more trials",
        )
    ci95 = [max(-1.0, value - Z95 * stderr), min(1.0, value + Z95 * stderr)]
    return KappaView(value=value, ci95=ci95, stderr=stderr, reason=None)


def agreement_row(
    judge: str | None, variant: str, pairs: Sequence[tuple[bool, bool]]
) -> AgreementRow:
    counts = tally(pairs)
    n = counts.n
    return AgreementRow(
        judge=judge,
        variant=variant,
        reviewed=n,
        percent_agreement=(counts.a + counts.d) / n,
        kappa=kappa(counts),
        confusion=Confusion(
            human_pass_judge_pass=counts.a,
            human_pass_judge_fail=counts.b,
            human_fail_judge_pass=counts.c,
            human_fail_judge_fail=counts.d,
        ),
        human_pass_rate=(counts.a + counts.b) / n,
        judge_pass_rate=(counts.a + counts.c) / n,
    )


def _rows(reviewed: Sequence[ReviewedTrial], variants: Sequence[str]) -> list[AgreementRow]:
    judges: list[str] = []
    for trial in reviewed:
        judges += [name for name, _ in trial.judges if name not in judges]
    shown = [v for v in variants if any(t.variant == v for t in reviewed)]
    shown += sorted({t.variant for t in reviewed} - set(shown))
    groups = [(v, [t for t in reviewed if t.variant == v]) for v in shown]
    if len(groups) > 1:
        groups.append((POOLED, list(reviewed)))
    rows: list[AgreementRow] = []
    for judge in [None, *judges]:
        for variant, trials in groups:
            pairs = [
                (t.human_pass, t.passed if judge is None else dict(t.judges)[judge])
                for t in trials
                if judge is None or judge in dict(t.judges)
            ]
            if pairs:
                rows.append(agreement_row(judge, variant, pairs))
    return rows


def _direction(value: float) -> str:
    return "up" if value > 0 else "down" if value < 0 else "flat"


def lift_check(
    reviewed: Sequence[ReviewedTrial], baseline: str, candidate: str, headline_pp: float | None
) -> LiftCheck:
    arms = {(t.variant, t.case_id, t.round): t for t in reviewed}
    pairs = [
        (arms[(baseline, case, round_)], trial)
        for (variant, case, round_), trial in sorted(arms.items())
        if variant == candidate and (baseline, case, round_) in arms
    ]
    if not pairs:
        return LiftCheck(
            baseline=baseline,
            candidate=candidate,
            pairs_reviewed=0,
            human_lift_pp=None,
            judge_lift_pp=None,
            headline_lift_pp=headline_pp,
            confirms=None,
            finding="No pair (case, round) has both arms reviewed, so nothing can confirm the "
            "lift's direction: review both arms of some pairs.",
        )
    n = len(pairs)
    human = 100 * sum(int(c.human_pass) - int(b.human_pass) for b, c in pairs) / n
    judged = 100 * sum(int(c.passed) - int(b.passed) for b, c in pairs) / n
    confirms = _direction(human) == _direction(judged)
    published = "" if headline_pp is None else f"; the published lift is {headline_pp:+.1f} pp"
    finding = (
        f"On {n} reviewed pair{'s' if n != 1 else ''}, people's lift is {human:+.1f} pp and "
        f"the judges' {judged:+.1f} pp: "
        + (
            f"the same direction ({_direction(human)})"
            if confirms
            else f"people's direction ({_direction(human)}) differs from the judges' "
            f"({_direction(judged)})"
        )
        + published
        + "."
    )
    return LiftCheck(
        baseline=baseline,
        candidate=candidate,
        pairs_reviewed=n,
        human_lift_pp=human,
        judge_lift_pp=judged,
        headline_lift_pp=headline_pp,
        confirms=confirms,
        finding=finding,
    )


def build_agreement(
    reviewed: Sequence[ReviewedTrial],
    *,
    sampled: int,
    variants: Sequence[str],
    comparisons: Sequence[tuple[str, str, float | None]] = (),
    empty: bool = False,
) -> Agreement | None:
    """The report's agreement section, or None when no trial was reviewed (so a report
    without reviews is exactly as before) unless `empty` asks for one without rows.
    `comparisons` are (baseline, candidate, published lift in pp or None)."""
    if not reviewed and not empty:
        return None
    rows = _rows(reviewed, variants)
    notes: list[str] = []
    if any(row.reviewed < FEW for row in rows):
        notes.append(
            f"Rows with fewer than {FEW} reviewed trials have wide, approximate intervals: "
            "kappa's standard error is a large-sample one."
        )
    return Agreement(
        sampled=sampled,
        reviewed=len(reviewed),
        interval_method=INTERVAL_METHOD,
        rows=rows,
        lift_checks=[lift_check(reviewed, b, c, pp) for b, c, pp in comparisons],
        notes=notes,
    )
