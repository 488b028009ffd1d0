"""Drawing a job's review sample and recording reviews, for the API and the web UI alike.

A sample is drawn from a settled job (finished, or cancelled with nothing left running), so
the same seed gives the same sample for as long as the job exists. A job has one sample of
record at a time: drawing another retires it, only when asked to (`replace`), so that nobody
redraws until the sample suits them by accident. A review is of a trial of the sample of
record and belongs to it: agreement is measured on one seeded random draw, never on trials
someone picked. Reviews are kept, never changed: a second review of a trial revises it (the
newest counts), and the older ones stay as its history. In a blind sample each reviewer
sees a trial's verdict only after reviewing it (`service.review.blindness`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from fastapi import HTTPException
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from service.api.access import get_job
from service.api.review_schemas import (
    ReviewRequest,
    ReviewView,
    SampledTrial,
    SampleRequest,
    SampleView,
)
from service.api.reviewer import Reviewer
from service.api.views import job_counts
from service.domain.planner import JobInputError
from service.domain.status import JobStatus
from service.review.blindness import ReviewerKey, verdict_shown
from service.review.sampling import draw
from service.store import reviews as stored
from service.store.models import Job, Review, ReviewSample, Trial
from service.teams import Principal

_OUTCOMES: dict[str, Literal["passed", "failed", "error"]] = {
    "passed": "passed",
    "failed": "failed",
    "error": "error",
}
# How to replace a sample of record, said the API's way (the web form says it its own way).
REPLACE_OVER_API = 'send the draw again with "replace": true'


def _settled(session: Session, job: Job) -> bool:
    if job.status == JobStatus.FINISHED:
        return True
    counts = job_counts(session, job.id)
    return job.status == JobStatus.CANCELLED and counts.queued == 0 and counts.running == 0


def _in_the_way(job_id: str, record: ReviewSample, reviews: int, how: str) -> HTTPException:
    return HTTPException(
        409,
        f"Job {job_id} already has a review sample of record, {record.id} (size "
        f"{record.size}, seed {record.seed}, drawn by {record.created_by}; {reviews} "
        f"review{'s' if reviews != 1 else ''}), and nothing was drawn. Drawing another "
        "retires it: its reviews are kept but stop counting in the report's agreement. To "
        f"do that, {how}; to measure agreement, review its trials instead.",
    )


def create_sample(
    session: Session,
    caller: Principal,
    job_id: str,
    request: SampleRequest,
    viewer: Reviewer,
    *,
    how_to_replace: str = REPLACE_OVER_API,
) -> SampleView:
    job = get_job(session, caller, job_id)
    if not _settled(session, job):
        raise HTTPException(
            409,
            f"Job {job_id} is {job.status} with trials still to run; draw its review sample "
            "once it has finished (or been cancelled and stopped), so the sample stays "
            "reproducible from its seed.",
        )
    record = stored.sample_of_record(session, job.id)
    if record is not None and not request.replace:
        reviews = len(stored.sample_reviews(session, record))
        raise _in_the_way(job_id, record, reviews, how_to_replace)
    candidates = stored.scored_candidates(session, job.id)
    if not candidates:
        raise HTTPException(
            409,
            f"Job {job_id} has no scored trial (passed, failed or a scored error), so "
            "there is nothing to review.",
        )
    drawn = draw(candidates, request.size, request.seed)
    try:
        sample = stored.add_sample(
            session,
            job.id,
            request.size,
            request.seed,
            [c.trial_id for c in drawn],
            caller.name,
            blind=request.blind,
            replaces=record,
        )
    except IntegrityError:
        # Another draw became the sample of record between our read and our insert.
        raise HTTPException(
            409,
            f"Another review sample of job {job_id} was drawn at the same moment, and nothing "
            f"was drawn by this request: read it (GET /v1/jobs/{job_id}/review-sample) before "
            "deciding to replace it.",
        ) from None
    return sample_view(session, sample, viewer)


def record_sample(session: Session, caller: Principal, job_id: str) -> ReviewSample | None:
    """The job's sample of record, or None before the first draw."""
    return stored.sample_of_record(session, get_job(session, caller, job_id).id)


def _key(review: Review) -> ReviewerKey:
    return (review.team, review.token_prefix)


def viewer_key(viewer: Reviewer) -> ReviewerKey:
    return (viewer.team, viewer.token_prefix)


def shown_to(session: Session, sample: ReviewSample, trial_id: str, viewer: Reviewer) -> bool:
    """Whether `viewer` may see the verdict on `trial_id` of `sample`."""
    reviewed_by = [
        _key(r) for r in stored.sample_reviews(session, sample) if r.trial_id == trial_id
    ]
    return verdict_shown(sample.blind, reviewed_by, viewer_key(viewer))


def review_views(reviews: Sequence[Review], trials: dict[str, Trial]) -> list[ReviewView]:
    """Views of reviews in id order, each naming the earlier review of its trial in the same
    sample it revises."""
    previous: dict[tuple[str, str], int] = {}
    views: list[ReviewView] = []
    for review in reviews:
        trial = trials[review.trial_id]
        key = (review.sample_id, review.trial_id)
        views.append(
            ReviewView(
                id=review.id,
                trial_id=review.trial_id,
                case_id=trial.case_id,
                variant=trial.variant,
                round=trial.round,
                verdict="pass" if review.verdict == "pass" else "fail",
                note=review.note,
                reviewer=review.reviewer,
                team=review.team,
                token_prefix=review.token_prefix,
                via="web" if review.via == "web" else "api",
                created_at=review.created_at,
                revises=previous.get(key),
                sample_id=review.sample_id,
                verdict_seen=review.verdict_seen,
            )
        )
        previous[key] = review.id
    return views


def _views(session: Session, reviews: Sequence[Review]) -> list[ReviewView]:
    return review_views(
        reviews, stored.trials_by_id(session, sorted({r.trial_id for r in reviews}))
    )


def job_review_views(
    session: Session, caller: Principal, job_id: str, *, history: bool
) -> list[ReviewView]:
    """The newest review of each trial of the job's sample of record, or with `history`
    every review of every sample (retired ones too), oldest first."""
    job = get_job(session, caller, job_id)
    if history:
        return _views(session, stored.job_reviews(session, job.id))
    record = stored.sample_of_record(session, job.id)
    if record is None:
        return []
    latest = {
        view.trial_id: view for view in _views(session, stored.sample_reviews(session, record))
    }
    return sorted(latest.values(), key=lambda v: v.id)


def sample_view(session: Session, sample: ReviewSample, viewer: Reviewer) -> SampleView:
    """The sample as `viewer` may see it: in a blind sample, the verdicts of the trials they
    have not reviewed are left out."""
    trials = stored.trials_by_id(session, list(sample.trial_ids))
    reviews = stored.sample_reviews(session, sample)
    latest = {view.trial_id: view for view in _views(session, reviews)}
    reviewed_by: dict[str, list[ReviewerKey]] = {}
    for review in reviews:
        reviewed_by.setdefault(review.trial_id, []).append(_key(review))
    me = viewer_key(viewer)
    entries: list[SampledTrial] = []
    for trial_id in sample.trial_ids:
        trial = trials.get(trial_id)
        if trial is None:
            continue
        shown = verdict_shown(sample.blind, reviewed_by.get(trial_id, []), me)
        outcome = _OUTCOMES.get(trial.outcome or "")
        entries.append(
            SampledTrial(
                trial_id=trial.id,
                case_id=trial.case_id,
                variant=trial.variant,
                round=trial.round,
                verdict_shown=shown,
                outcome=outcome if shown else None,
                error_kind=trial.error_kind if shown and outcome == "error" else None,
                review=latest.get(trial.id),
            )
        )
    return SampleView(
        id=sample.id,
        job_id=sample.job_id,
        size=sample.size,
        seed=sample.seed,
        algorithm=sample.algorithm,
        blind=sample.blind,
        created_by=sample.created_by,
        created_at=sample.created_at,
        retired_at=sample.retired_at,
        reviews=len(reviews),
        trials=entries,
    )


def post_review(
    session: Session, caller: Principal, job_id: str, request: ReviewRequest, who: Reviewer
) -> ReviewView:
    job = get_job(session, caller, job_id)
    record = stored.sample_of_record(session, job.id)
    if record is None or request.trial_id not in record.trial_ids:
        # The same answer for a trial of another job or team as for one that does not exist.
        raise JobInputError(
            ("body", "trial_id"),
            f"Trial {request.trial_id} is not in the review sample of record of job {job_id}: "
            f"review the trials of that sample (GET /v1/jobs/{job_id}/review-sample).",
        )
    review = stored.add_review(
        session,
        job_id=job.id,
        trial_id=request.trial_id,
        sample_id=record.id,
        verdict_seen=shown_to(session, record, request.trial_id, who),
        verdict=request.verdict,
        note=request.note,
        reviewer=request.reviewer.strip(),
        team=who.team,
        token_prefix=who.token_prefix,
        via=who.via,
    )
    views = _views(session, stored.sample_reviews(session, record))
    return next(view for view in views if view.id == review.id)
