"""The job report: a pure function of the stored job and its trials, as a `model.Report`."""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import NamedTuple

import numpy as np

from service.domain.job_spec import OFFLINE
from service.domain.outcomes import COUNTED_AS_FAILED, NOT_SCORED
from service.domain.status import JobStatus, Outcome, TrialStatus
from service.report import resampling
from service.report.columns import Columns, Ints
from service.report.estimates import DEFAULT_RESAMPLES, Metric, finish_estimate, plan_tallies
from service.report.model import (
    SCHEMA_VERSION,
    Bootstrap,
    CaseRow,
    EnvironmentImage,
    JudgeRate,
    JudgeRubric,
    MetricView,
    Outcomes,
    Record,
    Report,
    TaskNetwork,
    UnbuiltTask,
    VariantReport,
)
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
    # Why the job ended without running (no environment it needs built).
    error: str | None = None
    # (case, step, error) of the cases whose environment did not build (`build_error`).
    unbuilt: tuple[tuple[str, str | None, str], ...] = ()
    # (case, what it asked for) of the tasks that asked for a network (`JobSpec.networks`).
    networks: tuple[tuple[str, str], ...] = ()
    # The egress policy they ran under (`JobSpec.egress`).
    egress: str = OFFLINE
    # The bootstrap's version (`resampling`), the job's since its submission.
    bootstrap: int = resampling.V1
    judge_model: str | None = None
    # (judge, rubric sha256) of the model-graded judges the trials recorded.
    judge_rubrics: tuple[tuple[str, str], ...] = ()


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


def _outcomes(columns: Columns, finals: Ints, attempts: int) -> Outcomes:
    """A variant's final attempts by outcome (or status, when it has none), error kind and
    limit hit."""
    outcome = columns.outcome.codes[finals]
    status = columns.status.codes[finals]
    counts: Counter[str] = Counter()
    # Pairs of codes, counted: (outcome, status) -> how many.
    pairs, numbers = np.unique(outcome * len(columns.status.values) + status, return_counts=True)
    for pair, number in zip(pairs.tolist(), numbers.tolist(), strict=True):
        value = columns.outcome.values[pair // len(columns.status.values)]
        counts[value or columns.status.values[pair % len(columns.status.values)]] += number
    kinds: Counter[str] = Counter()
    codes, numbers = np.unique(columns.error_kind.codes[finals], return_counts=True)
    for code, number in zip(codes.tolist(), numbers.tolist(), strict=True):
        if kind := columns.error_kind.values[code]:
            kinds[kind] += number
    limits: Counter[str] = Counter()
    if columns.limits_hit:
        # The few rows that hit a limit, looked up among the finals (a sort of every final
        # attempt, as intersect1d makes, would cost more than the rest of this count).
        final = np.zeros(len(columns), dtype=np.bool_)
        final[finals] = True
        for row in sorted(columns.limits_hit):
            if final[row]:
                limits.update(columns.limits_hit[row])
    return Outcomes(
        passed=counts[Outcome.PASSED],
        failed=counts[Outcome.FAILED],
        error=counts[Outcome.ERROR],
        unfinished=counts[TrialStatus.QUEUED] + counts[TrialStatus.RUNNING],
        error_kinds=dict(sorted(kinds.items())),
        counted_as_failed=sum(kinds[k] for k in COUNTED_AS_FAILED),
        excluded=sum(kinds[k] for k in NOT_SCORED),
        limits_hit=dict(sorted(limits.items())),
        attempts=attempts,
        retried_attempts=attempts - len(finals),
    )


def _per_case(cases: Sequence[str], tallies: Sequence[tuple[int, int]], k: int) -> list[CaseRow]:
    # Each case's rates as `estimates` works them out for one case (its fraction, divided
    # once); cases share few distinct (n, c), so each is worked out once.
    rates: dict[tuple[int, int], tuple[float | None, float | None, float | None]] = {}
    for n, c in set(tallies):
        whole = math.comb(n, k) if n >= k else 0
        rates[(n, c)] = (
            c / n if n else None,
            math.comb(c, k) / whole if whole else None,
            (whole - math.comb(n - c, k)) / whole if whole else None,
        )
    return [
        {
            "case": case_id,
            "n": n,
            "passes": c,
            "pass_at_1": rates[(n, c)][0],
            "pass_hat_k": rates[(n, c)][1],
            "pass_at_k": rates[(n, c)][2],
        }
        for case_id, (n, c) in zip(cases, tallies, strict=True)
    ]


def _case_tallies(
    columns: Columns, finals: Ints, case_order: Sequence[str]
) -> tuple[list[str], list[tuple[int, int]]]:
    """The cases of one variant, the job's in its order and then any other case its scored
    trials name (in round, then plan order), each with (scored trials, passes)."""
    verdicts = columns.verdicts
    scored = finals[verdicts[finals] >= 0]
    names = list(dict.fromkeys(case_order))
    position = {case: i for i, case in enumerate(names)}
    of_code = np.array([position.get(v, -1) for v in columns.case.values] or [-1])
    found = of_code[columns.case.codes[scored]]
    if (found < 0).any():
        strays = scored[found < 0]
        strays = strays[np.lexsort((columns.order[strays], columns.round[strays]))]
        for code in dict.fromkeys(columns.case.codes[strays].tolist()):
            of_code[code] = len(names)
            names.append(columns.case.values[code])
        found = of_code[columns.case.codes[scored]]
    n = np.bincount(found, minlength=len(names))
    c = np.bincount(found[verdicts[scored] == 1], minlength=len(names))
    return names, list(zip(n.tolist(), c.tolist(), strict=True))


def _view(metric: Metric) -> MetricView:
    ci95 = metric.ci95
    return MetricView(
        value=metric.value,
        ci95=None if ci95 is None else [ci95[0], ci95[1]],
        stderr_clustered=metric.stderr_clustered,
        reason=metric.reason,
        cases_used=metric.cases_used,
    )


def tasks_counted(count: int) -> str:
    """`1 task`, `6 tasks`."""
    return "1 task" if count == 1 else f"{count} tasks"


def build_report(
    job: JobFacts,
    trials: Sequence[TrialFacts] | Columns,
    *,
    case_order: Sequence[str],
    generated_at: datetime,
    models_returned: Sequence[str] | None = None,
    judge_counts: Iterable[tuple[str, str, int, int]] = (),
) -> Report:
    """The report, from every attempt of the job's trials (as records or as `Columns`).
    `models_returned`, when given, is the distinct models the trials' answers named (the
    store reads them apart); else they come from the trials. `judge_counts` is
    (variant, judge, passed, scored) over the scored trials' last attempts."""
    judges_by_variant: dict[str, list[JudgeRate]] = defaultdict(list)
    for variant_name, judge_name, judge_passed, judge_scored in sorted(judge_counts):
        judges_by_variant[variant_name].append(
            JudgeRate(
                name=judge_name,
                passed=judge_passed,
                scored=judge_scored,
                pass_rate=judge_passed / judge_scored if judge_scored else None,
            )
        )
    columns = trials if isinstance(trials, Columns) else Columns.of_records(trials)
    variant_codes = columns.variant.codes
    # The variants in the order of their first trial by (case id, variant): the order the
    # store's rows came in when they were read by the (job, case, variant, round) index, now
    # explicit so that it does not depend on the database's plan. Case codes follow the
    # ids' order, so the smallest code is the first case id.
    first_case = {
        name: columns.case.values[int(columns.case.codes[variant_codes == code].min())]
        for code, name in enumerate(columns.variant.values)
        if (variant_codes == code).any()
    }
    names = sorted(first_case, key=lambda name: (first_case[name], name))
    # Every bootstrap of the report runs in one batch: with version 2, columns over the same
    # cases (the arms' pass@1, the lift) share one draw matrix; version 3 counts values.
    batch = resampling.Batch(job.bootstrap, job.seed, DEFAULT_RESAMPLES)
    all_finals = columns.finals  # by variant, then order
    planned = []
    for name in names:
        code = columns.variant.code(name)
        finals = all_finals[variant_codes[all_finals] == code]
        cases, tallies = _case_tallies(columns, finals, case_order)
        scored = {case: tally for case, tally in zip(cases, tallies, strict=True) if tally[0]}
        attempts = int(np.count_nonzero(variant_codes == code))
        planned.append(
            (name, plan_tallies(scored, job.rounds, batch), cases, tallies, finals, attempts)
        )
    comparisons = [
        plan_compare(
            columns,
            baseline=job.baseline,
            candidate=candidate,
            cases=case_order,
            rounds=job.rounds,
            # pass^1 is pass@1; with one round, say that stability is unknown instead.
            k=max(2, job.rounds),
            batch=batch,
            attempts=columns,
            finals=all_finals,
        )
        for candidate in job.arms
        if job.baseline is not None and candidate != job.baseline
    ]
    batch.run()
    variants = []
    for name, estimate_plan, cases, tallies, finals, attempts in planned:
        summary = finish_estimate(estimate_plan, batch)
        variants.append(
            VariantReport(
                name=name,
                pass_at_1=_view(summary.pass_at_1),
                pass_hat_k=_view(summary.pass_hat_k),
                pass_at_k=_view(summary.pass_at_k),
                scored_trials=summary.trials,
                outcomes=_outcomes(columns, finals, attempts),
                cases=_per_case(cases, tallies, job.rounds),
                judges=judges_by_variant.get(name, []),
            )
        )
    finished_code = columns.status.code(TrialStatus.FINISHED)
    finished = int(np.count_nonzero(columns.status.codes[all_finals] == finished_code))
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
    if job.networks:
        wanted = ", ".join(case for case, _ in job.networks)
        notes.append(
            f"{tasks_counted(len(job.networks))} asked for a network and ran offline: {wanted}. "
            "Harbor would run them online; one that needs the network fails here (the record "
            "says what each asked for)."
            if job.egress == OFFLINE
            else f"{tasks_counted(len(job.networks))} asked for a network and ran under egress "
            f"policy {job.egress}: {wanted}. Each connection is in the trial's events."
        )
    if job.unbuilt:
        unbuilt_names = ", ".join(case for case, _, _ in job.unbuilt)
        notes.append(
            f"{tasks_counted(len(job.unbuilt))} did not run, as the environment did not build: "
            f"{unbuilt_names}. Their trials are build_error, scored neither way; the record "
            "has each build's step and the end of its log."
        )
    if job.error is not None:
        notes.append(f"The job did not run: {job.error}")
    elif job.status not in (JobStatus.FINISHED, JobStatus.CANCELLED):
        # A cancelled job's note is above: it ends as it is.
        notes.append(
            f"The job is still {job.status}: {finished} of {job.planned} trials finished; "
            "these numbers will change."
        )
    if models_returned is None:
        models_returned = columns.models()
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
            unbuilt=[UnbuiltTask(case=c, step=s, error=e) for c, s, e in job.unbuilt],
            networks=[TaskNetwork(case=c, wanted=w, ran=job.egress) for c, w in job.networks],
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
            judge_model=job.judge_model,
            judge_rubrics=[JudgeRubric(judge=n, rubric_sha256=h) for n, h in job.judge_rubrics],
        ),
    )
