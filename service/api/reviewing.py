"""Drawing a job's review sample and recording reviews, for the API and the web UI alike.

A sample is drawn from a settled job (finished, or cancelled with nothing left running), so
the same seed gives the same sample for as long as the job exists. A review is of a trial in
one of the job's samples: agreement is measured on seeded random draws, never on trials
someone picked. Reviews are kept, never changed: a second review of a trial revises it (the
newest counts), and the older ones stay as its history.
"""

from __future__ import annotations

from collections.abc import Sequence

from fastapi import HTTPException
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
from service.review.sampling import draw
from service.store import reviews as stored
from service.store.models import Job, Review, ReviewSample, Trial
from service.teams import Principal


def _settled(session: Session, job: Job) -> bool:
    if job.status == JobStatus.FINISHED:
        return True
    counts = job_counts(session, job.id)
    return job.status == JobStatus.CANCELLED and counts.queued == 0 and counts.running == 0


def create_sample(
    session: Session, caller: Principal, job_id: str, request: SampleRequest
) -> SampleView:
    job = get_job(session, caller, job_id)
    if not _settled(session, job):
        raise HTTPException(
            409,
            f"Job {job_id} is {job.status} with trials still to run; draw its review sample "
            "once it has finished (or been cancelled and stopped), so the sample stays "
            "reproducible from its seed.",
        )
    candidates = stored.scored_candidates(session, job.id)
    if not candidates:
        raise HTTPException(
            409, f"Job {job_id} has no passed or failed trial, so there is nothing to review."
        )
    drawn = draw(candidates, request.size, request.seed)
    sample = stored.add_sample(
        session, job.id, request.size, request.seed, [c.trial_id for c in drawn], caller.name
    )
    return sample_view(session, sample)


def latest_sample(session: Session, caller: Principal, job_id: str) -> ReviewSample | None:
    job = get_job(session, caller, job_id)
    samples = stored.job_samples(session, job.id)
    return samples[0] if samples else None


def review_views(reviews: Sequence[Review], trials: dict[str, Trial]) -> list[ReviewView]:
    """Views of reviews in id order, each naming the earlier review of its trial it revises."""
    previous: dict[str, int] = {}
    views: list[ReviewView] = []
    for review in reviews:
        trial = trials[review.trial_id]
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
                revises=previous.get(review.trial_id),
            )
        )
        previous[review.trial_id] = review.id
    return views


def _views(session: Session, job_id: str) -> list[ReviewView]:
    reviews = stored.job_reviews(session, job_id)
    return review_views(
        reviews, stored.trials_by_id(session, sorted({r.trial_id for r in reviews}))
    )


def job_review_views(
    session: Session, caller: Principal, job_id: str, *, history: bool
) -> list[ReviewView]:
    """The job's reviews: the newest of each trial, or with `history` every one, oldest
    first."""
    views = _views(session, get_job(session, caller, job_id).id)
    if history:
        return views
    latest = {view.trial_id: view for view in views}
    return sorted(latest.values(), key=lambda v: v.id)


def sample_view(session: Session, sample: ReviewSample) -> SampleView:
    trials = stored.trials_by_id(session, list(sample.trial_ids))
    reviews = stored.job_reviews(session, sample.job_id)
    reviewed = {
        r.trial_id: r
        for r in review_views(
            reviews, stored.trials_by_id(session, sorted({r.trial_id for r in reviews}))
        )
    }
    return SampleView(
        id=sample.id,
        job_id=sample.job_id,
        size=sample.size,
        seed=sample.seed,
        algorithm=sample.algorithm,
        created_by=sample.created_by,
        created_at=sample.created_at,
        trials=[
            SampledTrial(
                trial_id=trial.id,
                case_id=trial.case_id,
                variant=trial.variant,
                round=trial.round,
                outcome="passed" if trial.outcome == "passed" else "failed",
                review=reviewed.get(trial.id),
            )
            for trial_id in sample.trial_ids
            if (trial := trials.get(trial_id)) is not None
        ],
    )


def post_review(
    session: Session, caller: Principal, job_id: str, request: ReviewRequest, who: Reviewer
) -> ReviewView:
    job = get_job(session, caller, job_id)
    if request.trial_id not in stored.sampled_trial_ids(session, job.id):
        # The same answer for a trial of another job or team as for one that does not exist.
        raise JobInputError(
            ("body", "trial_id"),
            f"Trial {request.trial_id} is not in a review sample of job {job_id}: review the "
            f"trials of its sample (GET /v1/jobs/{job_id}/review-sample), or draw a larger "
            "one with the same seed, which keeps the trials of the smaller.",
        )
    review = stored.add_review(
        session,
        job_id=job.id,
        trial_id=request.trial_id,
        verdict=request.verdict,
        note=request.note,
        reviewer=request.reviewer.strip(),
        team=who.team,
        token_prefix=who.token_prefix,
        via=who.via,
    )
    return next(view for view in _views(session, job.id) if view.id == review.id)
