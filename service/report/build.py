"""The job report: a pure function of the stored job and its trials."""

from __future__ import annotations

import itertools
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol, TypeVar

from service.report.estimates import pass_at_1, pass_at_k, pass_hat_k, summarize
from service.report.outcomes import COUNTED_AS_FAILED, NOT_SCORED, verdict
from service.report.paired import compare, render_comparison_text

SCHEMA_VERSION = 1


@dataclass(frozen=True)
class JobFacts:
    id: str
    status: str
    suite_name: str
    suite_sha256: str
    rounds: int
    seed: int
    planned: int
    model: str
    image: str
    image_digest: str | None
    service_version: str
    created_at: datetime
    baseline: str | None = None
    # Baseline first, then candidates.
    arms: tuple[str, ...] = ()
    docs_sha256: str | None = None
    docs_name: str | None = None


@dataclass(frozen=True)
class TrialFacts:
    case_id: str
    variant: str
    round: int
    order: int
    attempt: int
    status: str
    outcome: str | None
    error_kind: str | None
    model_returned: str | None
    input_tokens: int | None = None
    output_tokens: int | None = None
    tool_calls: int | None = None
    latency_s: float | None = None
    system_prompt_sha256: str | None = None
    limits_hit: tuple[str, ...] = ()
    cost_usd: float | None = None


class Attempt(Protocol):
    @property
    def variant(self) -> str: ...
    @property
    def order(self) -> int: ...
    @property
    def attempt(self) -> int: ...


A = TypeVar("A", bound=Attempt)


def final_attempts(trials: Iterable[A]) -> list[A]:
    """The last attempt of each planned trial; earlier attempts are kept but not scored."""
    latest: dict[tuple[str, int], A] = {}
    for trial in trials:
        key = (trial.variant, trial.order)
        if key not in latest or trial.attempt > latest[key].attempt:
            latest[key] = trial
    return sorted(latest.values(), key=lambda t: t.order)


def _outcomes(finals: Sequence[TrialFacts], all_trials: Sequence[TrialFacts]) -> dict[str, Any]:
    counts: Counter[str] = Counter()
    kinds: Counter[str] = Counter()
    limits: Counter[str] = Counter()
    for trial in finals:
        counts[trial.outcome or trial.status] += 1
        if trial.error_kind:
            kinds[trial.error_kind] += 1
        if trial.limits_hit:  # rarely: Counter.update costs a microsecond even when empty
            limits.update(trial.limits_hit)
    return {
        "passed": counts["passed"],
        "failed": counts["failed"],
        "error": counts["error"],
        "unfinished": counts["queued"] + counts["running"],
        "error_kinds": dict(sorted(kinds.items())),
        "counted_as_failed": sum(kinds[k] for k in COUNTED_AS_FAILED),
        "excluded": sum(kinds[k] for k in NOT_SCORED),
        "limits_hit": dict(sorted(limits.items())),
        "attempts": len(all_trials),
        "retried_attempts": len(all_trials) - len(finals),
    }


def _per_case(cases: dict[str, list[bool]], k: int) -> list[dict[str, Any]]:
    rows = []
    for case_id, runs in cases.items():
        one = {case_id: runs}
        rows.append(
            {
                "case": case_id,
                "n": len(runs),
                "passes": sum(runs),
                "pass_at_1": pass_at_1(one) if runs else None,
                "pass_hat_k": pass_hat_k(one, k),
                "pass_at_k": pass_at_k(one, k),
            }
        )
    return rows


def build_report(
    job: JobFacts,
    trials: Sequence[TrialFacts],
    *,
    case_order: Sequence[str],
    generated_at: datetime,
) -> dict[str, Any]:
    by_variant: dict[str, list[TrialFacts]] = defaultdict(list)
    for trial in trials:
        by_variant[trial.variant].append(trial)
    variants = []
    finals_by_variant = []
    for name, variant_trials in by_variant.items():
        finals = final_attempts(variant_trials)
        finals_by_variant.append(finals)
        cases: dict[str, list[bool]] = {case_id: [] for case_id in case_order}
        for trial in sorted(finals, key=lambda t: t.round):
            passed = verdict(trial.status, trial.outcome, trial.error_kind)
            if passed is not None:
                cases.setdefault(trial.case_id, []).append(passed)
        summary = summarize(
            {c: runs for c, runs in cases.items() if runs}, job.rounds, seed=job.seed
        )
        variants.append(
            {
                "name": name,
                "pass_at_1": summary["pass_at_1"],
                "pass_hat_k": summary["pass_hat_k"],
                "pass_at_k": summary["pass_at_k"],
                "scored_trials": summary["trials"],
                "outcomes": _outcomes(finals, variant_trials),
                "cases": _per_case(cases, job.rounds),
            }
        )
    # The job's final attempts are its variants' (an attempt's key holds its variant).
    finals = sorted(itertools.chain.from_iterable(finals_by_variant), key=lambda t: t.order)
    comparisons = [
        {
            **compare(
                finals,
                baseline=job.baseline,
                candidate=candidate,
                cases=case_order,
                rounds=job.rounds,
                # pass^1 is pass@1; with one round, say that stability is unknown instead.
                k=max(2, job.rounds),
                seed=job.seed,
                attempts=trials,
            ),
            "system_prompt_sha256": _prompt_hashes(finals, job.baseline, candidate),
        }
        for candidate in job.arms
        if job.baseline is not None and candidate != job.baseline
    ]
    finished = sum(1 for t in finals if t.status == "finished")
    notes = []
    if job.rounds == 1:
        notes.append(
            "One repetition cannot establish stability: pass^k needs k >= 2 rounds per case."
        )
    if job.status == "cancelled":
        notes.append(
            f"The job was cancelled: {finished} of {job.planned} planned trials finished, and "
            "these numbers cover only those."
        )
    elif job.status != "finished":
        notes.append(
            f"The job is still {job.status}: {finished} of {job.planned} trials finished; "
            "these numbers will change."
        )
    returned = sorted({t.model_returned for t in trials if t.model_returned})
    return {
        "schema_version": SCHEMA_VERSION,
        "job": job.id,
        "status": job.status,
        "k": job.rounds,
        "variants": variants,
        "comparisons": comparisons,
        "notes": notes,
        "record": {
            "service_version": job.service_version,
            "image": job.image,
            "image_digest": job.image_digest,
            "suite": job.suite_name,
            "suite_sha256": job.suite_sha256,
            "docs": job.docs_name,
            "docs_sha256": job.docs_sha256,
            "baseline": job.baseline,
            "arms": list(job.arms),
            "model_requested": job.model,
            "models_returned": returned,
            "submitted_at": job.created_at.isoformat() + "Z",
            "generated_at": generated_at.isoformat() + "Z",
            "k": job.rounds,
            "cases": list(case_order),
            "seed": job.seed,
            "planned_trials": job.planned,
        },
    }


def _prompt_hashes(finals: Sequence[TrialFacts], *arms: str | None) -> dict[str, list[str]]:
    """The distinct system prompts each arm saw: proof the arms really differed."""
    return {
        arm: sorted(
            {t.system_prompt_sha256 for t in finals if t.variant == arm and t.system_prompt_sha256}
        )
        for arm in arms
        if arm is not None
    }


def _metric_text(metric: dict[str, Any]) -> str:
    if metric["value"] is None:
        return f"n/a ({metric['reason']})"
    text = f"{100 * metric['value']:5.1f}%"
    if metric["ci95"] is not None:
        low, high = metric["ci95"]
        text += f"  [95% CI {100 * low:.1f}-{100 * high:.1f}]"
    if metric["stderr_clustered"] is not None:
        text += f"  SE {100 * metric['stderr_clustered']:.1f} pp"
    elif metric["reason"]:
        text += f"  ({metric['reason']})"
    return text


def _variant_lines(variant: dict[str, Any], k: int, unpaired: bool) -> list[str]:
    out = variant["outcomes"]
    kinds = ", ".join(f"{n} {kind}" for kind, n in out["error_kinds"].items())
    title = f"variant {variant['name']}: {variant['scored_trials']} scored trials"
    if unpaired:
        title += " (this arm alone, unpaired: not a comparison)"
    lines = [title, f"  pass@1   {_metric_text(variant['pass_at_1'])}"]
    if k > 1:  # with k = 1 both would repeat pass@1
        lines += [
            f"  pass^{k:<3} {_metric_text(variant['pass_hat_k'])}",
            f"  pass@{k:<3} {_metric_text(variant['pass_at_k'])}",
        ]
    lines.append(
        f"  outcomes passed {out['passed']}, failed {out['failed']}, error {out['error']}"
        + (f" ({kinds})" if kinds else "")
        + (f", retried attempts {out['retried_attempts']}" if out["retried_attempts"] else "")
    )
    if out["limits_hit"]:
        hits = ", ".join(f"{limit} {n}" for limit, n in out["limits_hit"].items())
        lines.append(f"  limits hit {hits}")
    lines += ["", f"  {'case':<28} {'n':>3} {'pass':>4}  pass@1" + (f"  pass^{k}" if k > 1 else "")]
    for row in variant["cases"]:
        one = "  n/a" if row["pass_at_1"] is None else f"{100 * row['pass_at_1']:5.0f}%"
        line = f"  {row['case']:<28} {row['n']:>3} {row['passes']:>4}  {one}"
        if k > 1:
            hat = "  n/a" if row["pass_hat_k"] is None else f"{100 * row['pass_hat_k']:5.0f}%"
            line += f"  {hat}"
        lines.append(line)
    return [*lines, ""]


def render_text(report: dict[str, Any]) -> str:
    record = report["record"]
    k = report["k"]
    lines = [
        f"examhall report {report['job']} ({report['status']})",
        f"suite {record['suite']} ({record['suite_sha256'][:12]}), "
        f"model {record['model_requested']}, k={k}, seed {record['seed']}",
    ]
    if record["docs"] or record["docs_sha256"]:
        lines.append(f"docs {record['docs'] or 'uploaded'} ({(record['docs_sha256'] or '')[:12]})")
    lines.append("")
    withheld = any(c["headline"] is None for c in report["comparisons"])
    for variant in report["variants"]:
        lines += _variant_lines(variant, k, unpaired=withheld)
    for comparison in report["comparisons"]:
        lines += [f"  {line}" for line in render_comparison_text(comparison)]
        prompts = comparison["system_prompt_sha256"]
        lines.append(
            "  System prompts "
            + "; ".join(
                f"{arm} {', '.join(h[:12] for h in hashes) or 'none'}"
                for arm, hashes in prompts.items()
            )
        )
        lines.append("")
    lines += [f"note: {note}" for note in report["notes"]]
    lines.append(
        f"examhall {record['service_version']}, image {record['image']}"
        f" ({(record['image_digest'] or 'no digest')[:19]}), generated {record['generated_at']}"
    )
    return "\n".join(lines) + "\n"
