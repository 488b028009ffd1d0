"""A report laid out for a terminal (`GET /v1/jobs/{id}/report?format=text`, `examhall
report`): each variant's rates and per-case table, then each comparison as pi-evals prints
its docs-lift report."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from service.report.model import (
    TELEMETRY,
    Comparison,
    DeltaUnavailable,
    MetricView,
    Report,
    TotalUnavailable,
    VariantReport,
)
from service.report.render_agreement import agreement_lines

_LABELS = {
    "tokens": "Tokens",
    "tool_calls": "Tool calls",
    "latency_s": "Latency",
    "cost_usd": "Est. cost",
}


def uncertainty_note(metric: MetricView) -> str:
    """What follows a rate's interval, the same on the page and in the text: its clustered
    standard error only beside a bootstrap interval, which it agrees with. Where every case
    scored the same the SE is 0 by construction while Wilson's interval stays wide
    (service/report/estimates.py), so the reason is shown instead of an "SE 0.0 pp" that
    would read as contradicting "[64.6-100.0]"."""
    if metric.reason:
        return f"({metric.reason})"
    if metric.stderr_clustered is not None:
        return f"SE {100 * metric.stderr_clustered:.1f} pp"
    return ""


def _metric_text(metric: MetricView) -> str:
    if metric.value is None:
        return f"n/a ({metric.reason})"
    text = f"{100 * metric.value:5.1f}%"
    if metric.ci95 is not None:
        low, high = metric.ci95
        text += f"  [95% CI {100 * low:.1f}-{100 * high:.1f}]"
    if note := uncertainty_note(metric):
        text += f"  {note}"
    return text


def _width(names: Iterable[str], heading: str, least: int) -> int:
    """A name column as wide as its longest name, so a long task id never pushes its row's
    numbers out of line with the others'."""
    return max([least, len(heading), *(len(name) for name in names)])


def _variant_lines(variant: VariantReport, k: int, unpaired: bool) -> list[str]:
    out = variant.outcomes
    kinds = ", ".join(f"{n} {kind}" for kind, n in out.error_kinds.items())
    title = f"variant {variant.name}: {variant.scored_trials} scored trials"
    if unpaired:
        title += " (this arm alone, unpaired: not a comparison)"
    lines = [title, f"  pass@1   {_metric_text(variant.pass_at_1)}"]
    if k > 1:  # with k = 1 both would repeat pass@1
        lines += [
            f"  pass^{k:<3} {_metric_text(variant.pass_hat_k)}",
            f"  pass@{k:<3} {_metric_text(variant.pass_at_k)}",
        ]
    lines.append(
        f"  outcomes passed {out.passed}, failed {out.failed}, error {out.error}"
        + (f" ({kinds})" if kinds else "")
        + (f", retried attempts {out.retried_attempts}" if out.retried_attempts else "")
    )
    if out.limits_hit:
        hits = ", ".join(f"{limit} {n}" for limit, n in out.limits_hit.items())
        lines.append(f"  limits hit {hits}")
    case_w = _width((row["case"] for row in variant.cases), "case", 28)
    heading = f"  {'case':<{case_w}} {'n':>3} {'pass':>4}  pass@1"
    lines += ["", heading + (f"  pass^{k}" if k > 1 else "")]
    for row in variant.cases:
        one = f"{'n/a':>6}" if row["pass_at_1"] is None else f"{100 * row['pass_at_1']:5.0f}%"
        line = f"  {row['case']:<{case_w}} {row['n']:>3} {row['passes']:>4}  {one}"
        if k > 1:
            hat = f"{'n/a':>6}" if row["pass_hat_k"] is None else f"{100 * row['pass_hat_k']:5.0f}%"
            line += f"  {hat}"
        lines.append(line)
    if variant.judges:
        judge_w = _width((judge.name for judge in variant.judges), "judge", 40)
        lines += ["", f"  {'judge':<{judge_w}} {'scored':>6} {'pass':>5}  pass rate"]
        for judge in variant.judges:
            rate = f"{'n/a':>6}" if judge.pass_rate is None else f"{100 * judge.pass_rate:5.0f}%"
            lines.append(f"  {judge.name:<{judge_w}} {judge.scored:>6} {judge.passed:>5}  {rate}")
    return [*lines, ""]


def _pct(value: float | None) -> str:
    assert value is not None  # only called when the headline has the number
    return f"{100 * value:.1f}%"


def _p_value(p: float) -> str:
    return f"{p:.3f}" if p >= 0.001 else f"{p:.1e}"


def _amount(name: str, value: float, *, signed: bool = False) -> str:
    magnitude = abs(value)
    # What rounds to zero prints as "+0.0", never "-0.0".
    shown_zero = magnitude < (0.00005 if name == "cost_usd" else 0.05)
    negative = value < 0 and not (shown_zero and not isinstance(magnitude, int))
    sign = ("-" if negative else "+") if signed else ("-" if negative else "")
    if isinstance(magnitude, int):  # a total of counts: tokens or tool calls
        return f"{sign}{magnitude:,}"
    if name == "cost_usd":
        return f"{sign}${magnitude:.4f}"
    if name == "latency_s":
        return f"{sign}{magnitude:.1f} s"
    if name == "tokens":
        return f"{sign}{magnitude:,.0f}"
    return f"{sign}{magnitude:.1f}"


def comparison_lines(comparison: Comparison) -> list[str]:
    """Lines for a terminal, laid out as pi-evals prints its docs-lift report."""
    base, cand = comparison.baseline, comparison.candidate
    lines = [
        f"{cand} vs {base} (baseline)",
        f"Pairs {comparison.pairs_eligible}/{comparison.pairs_total} eligible",
    ]
    head = comparison.headline
    if head is None:
        lines.append(f"Pass rate {comparison.withheld_reason}")
    else:
        ci = head.lift_ci95_pp
        ci_text = f" [95% CI {ci[0]:+.1f} to {ci[1]:+.1f} pp]" if ci else " [no CI: 1 case]"
        lines.append(
            f"Pass rate {head.lift_pp:+.1f} pp{ci_text} ({cand} "
            f"{_pct(head.candidate_pass_rate)}, {base} {_pct(head.baseline_pass_rate)})"
        )
        mde = "n/a (1 case)" if head.mde_pp is None else f"{head.mde_pp:.1f} pp"
        lines.append(
            f"Wins {head.wins}, ties {head.ties}, losses {head.losses}; "
            f"McNemar mid-p {_p_value(head.mcnemar_midp)}; MDE {mde} (80% power, alpha 0.05)"
        )
        k, hat = head.k, head.pass_hat_k
        if head.pass_hat_k_reason:
            lines.append(f"pass^{k} n/a: {head.pass_hat_k_reason}")
        else:
            lines.append(f"pass^{k} {cand} {_pct(hat.candidate)}, {base} {_pct(hat.baseline)}")

    flags = ", ".join(comparison.flags) or "none"
    flaky = comparison.flaky_cases
    flaky_text = "; ".join(
        f"{arm}: {', '.join(cases)}"
        for arm, cases in ((cand, flaky.candidate), (base, flaky.baseline))
        if cases
    )
    lines.append(f"Flags: {flags}" + (f" (flaky cases {flaky_text})" if flaky_text else ""))

    for name in TELEMETRY:
        label = _LABELS[name]
        delta = getattr(comparison.deltas, name)
        if isinstance(delta, DeltaUnavailable):
            lines.append(f"{label} unavailable ({delta.coverage})")
            continue
        lines.append(
            f"{label} {_amount(name, delta.mean_delta, signed=True)} "
            f"({cand} {_amount(name, delta.candidate_mean)}, "
            f"{base} {_amount(name, delta.baseline_mean)}, {delta.coverage})"
        )

    lines.append("Operational totals:")
    for arm in (cand, base):
        totals = comparison.totals[arm]
        parts = [f"{totals.trials} trials"]
        for name in TELEMETRY:
            total = getattr(totals, name)
            label = _LABELS[name].lower()
            measured = total.coverage.split()[0]
            if isinstance(total, TotalUnavailable):
                parts.append(f"{label} unavailable ({measured})")
            else:
                parts.append(f"{label} {_amount(name, total.total)} ({measured})")
        lines.append(f"  {arm}: " + "; ".join(parts))

    by_round: dict[int, dict[str | None, int]] = defaultdict(lambda: defaultdict(int))
    for row in comparison.order:
        by_round[row["round"]][row["first"]] += 1
    if by_round:
        rounds_text = []
        for round_, firsts in sorted(by_round.items()):
            counts = ", ".join(
                f"{arm} first {n}" if arm else f"{n} without both arms"
                for arm, n in sorted(firsts.items(), key=lambda kv: (kv[0] is None, str(kv[0])))
            )
            rounds_text.append(f"round {round_}: {counts}")
        lines.append("Order: " + "; ".join(rounds_text))

    if comparison.blocked:
        lines.append("Blocked pairs:")
        for blocked in comparison.blocked:
            lines.append(f"  {blocked.case} round {blocked.round}: " + "; ".join(blocked.reasons))
    return lines


def render_text(report: Report) -> str:
    record = report.record
    k = report.k
    lines = [
        f"examhall report {report.job} ({report.status})",
        f"suite {record.suite} ({record.suite_sha256[:12]}), "
        f"model {record.model_requested}, k={k}, seed {record.seed}, "
        f"bootstrap v{record.bootstrap.version}",
    ]
    if record.docs or record.docs_sha256:
        lines.append(f"docs {record.docs or 'uploaded'} ({(record.docs_sha256 or '')[:12]})")
    lines.append("")
    withheld = any(c.headline is None for c in report.comparisons)
    for variant in report.variants:
        lines += _variant_lines(variant, k, unpaired=withheld)
    for comparison in report.comparisons:
        lines += [f"  {line}" for line in comparison_lines(comparison)]
        lines.append(
            "  System prompts "
            + "; ".join(
                f"{arm} {', '.join(h[:12] for h in hashes) or 'none'}"
                for arm, hashes in comparison.system_prompt_sha256.items()
            )
        )
        lines.append("")
    if report.agreement is not None:
        lines += agreement_lines(report.agreement)
    lines += [f"note: {note}" for note in report.notes]
    lines.append(
        f"examhall {record.service_version}, image {record.image}"
        f" ({(record.image_digest or 'no digest')[:19]}), generated {record.generated_at}"
    )
    lines += [
        f"  {env.case} ({env.variant}) ran in {env.image}"
        f" ({(env.image_digest or 'no digest')[:19]})"
        for env in record.environments
    ]
    lines += [
        f"  {task.case} did not build"
        + (f" at {task.step}" if task.step else "")
        + f": {_first_line(task.error)}"
        for task in record.unbuilt
    ]
    lines += [
        f"  {task.case} asked for a network ({task.wanted}) and ran "
        + ("offline" if task.ran == "offline" else f"under egress policy {task.ran}")
        for task in record.networks
    ]
    return "\n".join(lines) + "\n"


def _first_line(text: str, width: int = 160) -> str:
    line = text.strip().splitlines()[0] if text.strip() else "(no message)"
    return line if len(line) <= width else line[: width - 3] + "..."
