"""A job's reviews read from the store as the agreement section of its report
(`service.report.agreement`): the newest review of each sampled trial, beside its judges."""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

from service.report.agreement import ReviewedTrial, build_agreement
from service.report.agreement_model import Agreement
from service.report.model import Report
from service.store.reviews import (
    job_reviews,
    latest_reviews,
    sampled_trial_ids,
    trials_by_id,
)


def judge_verdicts(judges: list[Any] | None) -> tuple[tuple[str, bool], ...]:
    """Each judge's name and whether it passed (score >= 1). A second judge of the same
    name is told apart by its position ("name #2"); an entry without a numeric score is no
    verdict and is left out."""
    found: list[tuple[str, bool]] = []
    seen: dict[str, int] = {}
    for judge in judges or []:
        if not isinstance(judge, dict):
            continue
        score = judge.get("score")
        if isinstance(score, bool) or not isinstance(score, int | float):
            continue
        name = str(judge.get("name") or "judge")
        seen[name] = seen.get(name, 0) + 1
        label = name if seen[name] == 1 else f"{name} #{seen[name]}"
        found.append((label, score >= 1))
    return tuple(found)


def job_agreement(session: Session, job_id: str, report: Report) -> Agreement | None:
    """The agreement of the job's reviews with its judges, or None without reviews."""
    reviews = latest_reviews(job_reviews(session, job_id))
    if not reviews:
        return None
    sampled = sampled_trial_ids(session, job_id)
    trials = trials_by_id(session, sorted(set(reviews) & sampled))
    reviewed = [
        ReviewedTrial(
            trial_id=trial.id,
            variant=trial.variant,
            case_id=trial.case_id,
            round=trial.round,
            passed=trial.outcome == "passed",
            judges=judge_verdicts(trial.judges),
            human_pass=reviews[trial.id].verdict == "pass",
        )
        for trial in sorted(trials.values(), key=lambda t: (t.order, t.variant))
        if trial.outcome in ("passed", "failed")
    ]
    comparisons = [
        (c.baseline, c.candidate, c.headline.lift_pp if c.headline else None)
        for c in report.comparisons
    ]
    return build_agreement(
        reviewed,
        sampled=len(sampled),
        variants=[v.name for v in report.variants],
        comparisons=comparisons,
    )


def with_agreement(session: Session, job_id: str, report: Report) -> Report:
    """The report with its agreement section; the same report when nobody reviewed."""
    agreement = job_agreement(session, job_id, report)
    if agreement is None:
        return report
    return report.model_copy(update={"agreement": agreement})
