"""A job's reviews read from the store as the agreement section of its report
(`service.report.agreement`): the reviews of its sample of record, one per trial, beside its
judges; reviews made in retired samples are only counted apart.

A trial's counted review is its newest in the sample; in a blind sample, its newest made
without the verdict in view when there is one (a reviewer who revises after seeing the
judges is no longer blind). A scored error (agent_error, timeout, ...) is a failed trial,
as in the report's pass rates (`service.domain.outcomes.verdict`), so the trial-verdict row
sets the person's pass or fail against a fail; a judge that did not score it has no say."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy.orm import Session

from service.domain.outcomes import verdict
from service.report.agreement import ReviewedTrial, build_agreement
from service.report.agreement_model import Agreement
from service.report.model import Report
from service.store.models import Review
from service.store.reviews import job_reviews, sample_of_record, trials_by_id


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


def counted_reviews(reviews: Sequence[Review], blind: bool | None) -> dict[str, Review]:
    """trial id -> the review that counts, of one sample's reviews in id order."""
    counted: dict[str, Review] = {}
    for review in reviews:
        earlier = counted.get(review.trial_id)
        if blind and review.verdict_seen and earlier is not None and not earlier.verdict_seen:
            continue
        counted[review.trial_id] = review
    return counted


_BLINDNESS = {
    True: "blind: each reviewer saw a trial's verdict only after reviewing it",
    False: "not blind: its reviewers saw the judges' verdicts",
    None: "drawn before blindness was recorded: its reviewers could see the verdicts",
}


def counted_text(agreement: Agreement) -> str:
    left_out = (
        f"; {agreement.retired_reviews} review(s) made in {agreement.retired_samples} "
        "retired sample(s) are kept but not counted"
        if agreement.retired_reviews
        else ""
    )
    blindness = _BLINDNESS[agreement.blind]
    return f"Counted: the reviews of sample {agreement.sample_id}, {blindness}{left_out}."


def _notes(agreement: Agreement) -> list[str]:
    notes: list[str] = []
    if agreement.blind and agreement.verdict_seen:
        notes.append(
            f"{agreement.verdict_seen} counted review(s) were made with the verdict in view."
        )
    if agreement.scored_errors:
        notes.append(
            f"{agreement.scored_errors} reviewed trial(s) are scored errors, whose verdict "
            "is a fail."
        )
    return notes


def job_agreement(session: Session, job_id: str, report: Report) -> Agreement | None:
    """The agreement of the job's reviews with its judges, or None without reviews."""
    everything = job_reviews(session, job_id)
    if not everything:
        return None
    # A review is made in the sample of record, and only a draw retires it, so a job with
    # reviews has one; "none" is handled all the same (nothing is counted).
    record = sample_of_record(session, job_id)
    record_id = record.id if record is not None else None
    blind = record.blind if record is not None else None
    retired = [r for r in everything if r.sample_id != record_id]
    counted = counted_reviews([r for r in everything if r.sample_id == record_id], blind)
    sampled = list(record.trial_ids) if record is not None else []
    trials = trials_by_id(session, sorted(set(counted) & set(sampled)))
    verdicts = {t.id: verdict(t.status, t.outcome, t.error_kind) for t in trials.values()}
    reviewed = [
        ReviewedTrial(
            trial_id=trial.id,
            variant=trial.variant,
            case_id=trial.case_id,
            round=trial.round,
            passed=verdicts[trial.id] is True,
            judges=judge_verdicts(trial.judges),
            human_pass=counted[trial.id].verdict == "pass",
        )
        for trial in sorted(trials.values(), key=lambda t: (t.order, t.variant))
        if verdicts[trial.id] is not None
    ]
    comparisons = [
        (c.baseline, c.candidate, c.headline.lift_pp if c.headline else None)
        for c in report.comparisons
    ]
    agreement = build_agreement(
        reviewed,
        sampled=len(sampled),
        variants=[v.name for v in report.variants],
        comparisons=comparisons,
        empty=True,
    )
    assert agreement is not None  # empty=True always builds one
    shown = {t.trial_id for t in reviewed}
    facts = agreement.model_copy(
        update={
            "sample_id": record_id,
            "blind": blind,
            "verdict_seen": sum(
                1
                for trial_id, review in counted.items()
                if trial_id in shown and (review.verdict_seen or not blind)
            ),
            "scored_errors": sum(
                1 for t in trials.values() if t.outcome == "error" and t.id in shown
            ),
            "retired_samples": len({r.sample_id for r in retired}),
            "retired_reviews": len(retired),
        }
    )
    return facts.model_copy(
        update={"counted": counted_text(facts), "notes": [*_notes(facts), *facts.notes]}
    )


def with_agreement(session: Session, job_id: str, report: Report) -> Report:
    """The report with its agreement section; the same report when nobody reviewed."""
    agreement = job_agreement(session, job_id, report)
    if agreement is None:
        return report
    return report.model_copy(update={"agreement": agreement})
