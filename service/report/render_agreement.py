"""The report's agreement section laid out for a terminal (`render_text` adds it only when
someone reviewed)."""

from __future__ import annotations

from service.report.agreement_model import Agreement, AgreementRow, KappaView

VERDICT = "trial verdict"


def kappa_text(kappa: KappaView) -> str:
    if kappa.value is None:
        return f"kappa n/a ({kappa.reason})"
    text = f"kappa {kappa.value:+.2f}"
    if kappa.ci95 is not None:
        low, high = kappa.ci95
        return f"{text} [95% CI {low:+.2f} to {high:+.2f}]"
    return f"{text} (no interval: {kappa.reason})"


def row_text(row: AgreementRow) -> str:
    c = row.confusion
    return (
        f"  {row.judge or VERDICT} / {row.variant}: {row.reviewed} reviewed, "
        f"agreement {100 * row.percent_agreement:.1f}%, {kappa_text(row.kappa)}; "
        f"pass rate people {100 * row.human_pass_rate:.1f}%, judge "
        f"{100 * row.judge_pass_rate:.1f}%; people pass/judge pass {c.human_pass_judge_pass}, "
        f"pass/fail {c.human_pass_judge_fail}, fail/pass {c.human_fail_judge_pass}, "
        f"fail/fail {c.human_fail_judge_fail}"
    )


def agreement_lines(agreement: Agreement) -> list[str]:
    lines = [
        f"Human review: {agreement.reviewed} of {agreement.sampled} sampled trials reviewed",
        *([f"  {agreement.counted}"] if agreement.counted else []),
        *(row_text(row) for row in agreement.rows),
    ]
    for check in agreement.lift_checks:
        lines.append(f"  Lift check {check.candidate} vs {check.baseline}: {check.finding}")
    lines += [f"  {note}" for note in agreement.notes]
    lines.append(f"  Interval: {agreement.interval_method}.")
    lines.append("")
    return lines
