"""The job report: a pure function of the stored job and its trials, as a `model.Report`."""

from __future__ import annotations

import itertools
import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import NamedTuple, Protocol, TypeVar

from service.domain.status import JobStatus, Outcome, TrialStatus
from service.report import resampling
from service.report.estimates import DEFAULT_RESAMPLES, Metric, finish_estimate, plan_estimate
from service.report.model import (
    SCHEMA_VERSION,
    Bootstrap,
    CaseRow,
    EnvironmentImage,
    MetricView,
    Outcomes,
    Record,
    Report,
    VariantReport,
)
from service.report.outcomes import COUNTED_AS_FAILED, NOT_SCORED, verdict
from service.report.paired import plan_compare


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
    # (case, variant, image, digest) of the trials that ran in an image of their own.
    environments: tuple[tuple[str, str, str, str | None], ...] = ()
    # Why the job ended without running (an environment that did not build).
    error: str | None = None
    # The bootstrap's version (`resampling`), the job's since its submission.
    bootstrap: int = resampling.V1


class TrialFacts(NamedTuple):
    """One attempt of a planned trial, as the report reads it. A named tuple, not a
    dataclass: a large job's report makes one for each of 100,000 rows."""

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


def _outcomes(finals: Sequence[TrialFacts], all_trials: Sequence[TrialFacts]) -> Outcomes:
    counts: Counter[str] = Counter()
    kinds: Counter[str] = Counter()
    limits: Counter[str] = Counter()
    for trial in finals:
        counts[trial.outcome or trial.status] += 1
        if trial.error_kind:
            kinds[trial.error_kind] += 1
        if trial.limits_hit:  # rarely: Counter.update costs a microsecond even when empty
            limits.update(trial.limits_hit)
    return Outcomes(
        passed=counts[Outcome.PASSED],
        failed=counts[Outcome.FAILED],
        error=counts[Outcome.ERROR],
        unfinished=counts[TrialStatus.QUEUED] + counts[TrialStatus.RUNNING],
        error_kinds=dict(sorted(kinds.items())),
        counted_as_failed=sum(kinds[k] for k in COUNTED_AS_FAILED),
        excluded=sum(kinds[k] for k in NOT_SCORED),
        limits_hit=dict(sorted(limits.items())),
        attempts=len(all_trials),
        retried_attempts=len(all_trials) - len(finals),
    )


def _per_case(cases: dict[str, list[bool]], k: int) -> list[CaseRow]:
    # Each case's rates as `estimates` works them out for one case (its fraction, divided
    # once), without building a one-case mapping per metric for every case.
    rows = []
    for case_id, runs in cases.items():
        n, c = len(runs), sum(runs)
        whole = math.comb(n, k) if n >= k else 0
        rows.append(
            CaseRow(
                case=case_id,
                n=n,
                passes=c,
                pass_at_1=c / n if runs else None,
                pass_hat_k=math.comb(c, k) / whole if whole else None,
                pass_at_k=(whole - math.comb(n - c, k)) / whole if whole else None,
            )
        )
    return rows


def _view(metric: Metric) -> MetricView:
    ci95 = metric.ci95
    return MetricView(
        value=metric.value,
        ci95=None if ci95 is None else [ci95[0], ci95[1]],
        stderr_clustered=metric.stderr_clustered,
        reason=metric.reason,
        cases_used=metric.cases_used,
    )


def build_report(
    job: JobFacts,
    trials: Sequence[TrialFacts],
    *,
    case_order: Sequence[str],
    generated_at: datetime,
    models_returned: Sequence[str] | None = None,
) -> Report:
    """The report. `models_returned`, when given, is the distinct models the trials' answers
    named (the store reads them apart); else they come from the trials."""
    by_variant: dict[str, list[TrialFacts]] = defaultdict(list)
    for trial in trials:
        by_variant[trial.variant].append(trial)
    # The variants in the order of their first trial by (case id, variant): the order the
    # store's rows came in when they were read by the (job, case, variant, round) index, now
    # explicit so that it does not depend on the database's plan.
    first_case: dict[str, str] = {}
    for trial in trials:
        if trial.variant not in first_case or trial.case_id < first_case[trial.variant]:
            first_case[trial.variant] = trial.case_id
    by_variant = {
        name: by_variant[name]
        for name in sorted(by_variant, key=lambda name: (first_case[name], name))
    }
    # Every bootstrap of the report runs in one batch: with version 2, columns over the same
    # cases (the arms' pass@1, the lift) share one draw matrix.
    batch = resampling.Batch(job.bootstrap, job.seed, DEFAULT_RESAMPLES)
    planned = []
    finals_by_variant = []
    for name, variant_trials in by_variant.items():
        finals = final_attempts(variant_trials)
        finals_by_variant.append(finals)
        cases: dict[str, list[bool]] = {case_id: [] for case_id in case_order}
        for trial in sorted(finals, key=lambda t: t.round):
            passed = verdict(trial.status, trial.outcome, trial.error_kind)
            if passed is not None:
                cases.setdefault(trial.case_id, []).append(passed)
        scored = {c: runs for c, runs in cases.items() if runs}
        planned.append((name, plan_estimate(scored, job.rounds, batch), cases, finals))
    # The job's final attempts are its variants' (an attempt's key holds its variant).
    finals = sorted(itertools.chain.from_iterable(finals_by_variant), key=lambda t: t.order)
    comparisons = [
        plan_compare(
            finals,
            baseline=job.baseline,
            candidate=candidate,
            cases=case_order,
            rounds=job.rounds,
            # pass^1 is pass@1; with one round, say that stability is unknown instead.
            k=max(2, job.rounds),
            batch=batch,
            attempts=trials,
        )
        for candidate in job.arms
        if job.baseline is not None and candidate != job.baseline
    ]
    batch.run()
    variants = []
    for name, estimate_plan, cases, variant_finals in planned:
        summary = finish_estimate(estimate_plan, batch)
        variants.append(
            VariantReport(
                name=name,
                pass_at_1=_view(summary.pass_at_1),
                pass_hat_k=_view(summary.pass_hat_k),
                pass_at_k=_view(summary.pass_at_k),
                scored_trials=summary.trials,
                outcomes=_outcomes(variant_finals, by_variant[name]),
                cases=_per_case(cases, job.rounds),
            )
        )
    done = TrialStatus.FINISHED
    finished = sum(1 for t in finals if t.status == done)
    notes = []
    if job.rounds == 1:
        notes.append(
            "One repetition cannot establish stability: pass^k needs k >= 2 rounds per case."
        )
    if job.status == JobStatus.CANCELLED:
        notes.append(
            f"The job was cancelled: {finished} of {job.planned} planned trials finished, and "
            "these numbers cover only those."
        )
    if job.error is not None:
        notes.append(f"The job did not run: {job.error}")
    elif job.status != JobStatus.FINISHED:
        notes.append(
            f"The job is still {job.status}: {finished} of {job.planned} trials finished; "
            "these numbers will change."
        )
    if models_returned is None:
        models_returned = [t.model_returned for t in trials if t.model_returned]
    returned = sorted(set(models_returned))
    return Report(
        schema_version=SCHEMA_VERSION,
        job=job.id,
        status=JobStatus(job.status),
        k=job.rounds,
        variants=variants,
        comparisons=[finish() for finish in comparisons],
        notes=notes,
        record=Record(
            service_version=job.service_version,
            image=job.image,
            image_digest=job.image_digest,
            environments=[
                EnvironmentImage(case=c, variant=v, image=i, image_digest=d)
                for c, v, i, d in job.environments
            ],
            suite=job.suite_name,
            suite_sha256=job.suite_sha256,
            docs=job.docs_name,
            docs_sha256=job.docs_sha256,
            baseline=job.baseline,
            arms=list(job.arms),
            model_requested=job.model,
            models_returned=returned,
            submitted_at=job.created_at.isoformat() + "Z",
            generated_at=generated_at.isoformat() + "Z",
            k=job.rounds,
            cases=list(case_order),
            seed=job.seed,
            bootstrap=Bootstrap(
                version=job.bootstrap,
                generator=resampling.GENERATORS[job.bootstrap],
                resamples=DEFAULT_RESAMPLES,
            ),
            planned_trials=job.planned,
        ),
    )
