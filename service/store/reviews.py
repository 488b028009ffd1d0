"""Human review's SQL: a job's scored trials to sample from, the samples drawn, and the
reviews people gave (append-only: a trial's newest review is its review)."""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from service.review.sampling import ALGORITHM, SCORED, Candidate
from service.store.clock import now
from service.store.models import Review, ReviewSample, Token, Trial


def scored_candidates(session: Session, job_id: str) -> list[Candidate]:
    """The job's planned trials' final attempts that passed or failed, in plan order."""
    rows = session.execute(
        select(
            Trial.id,
            Trial.variant,
            Trial.case_id,
            Trial.round,
            Trial.order,
            Trial.attempt,
            Trial.outcome,
        ).where(Trial.job_id == job_id)
    )
    latest: dict[tuple[str, int], tuple[int, Candidate]] = {}
    for trial_id, variant, case_id, round_, order, attempt, outcome in rows:
        key = (variant, order)
        if key not in latest or attempt > latest[key][0]:
            found = Candidate(trial_id, variant, case_id, round_, order, outcome or "")
            latest[key] = (attempt, found)
    finals = [candidate for _, candidate in latest.values() if candidate.outcome in SCORED]
    return sorted(finals, key=lambda c: (c.order, c.variant))


def add_sample(
    session: Session, job_id: str, size: int, seed: int, trial_ids: list[str], created_by: str
) -> ReviewSample:
    sample = ReviewSample(
        id=f"sample-{secrets.token_hex(8)}",
        job_id=job_id,
        size=size,
        seed=seed,
        algorithm=ALGORITHM,
        trial_ids=trial_ids,
        created_by=created_by,
        created_at=now(),
    )
    session.add(sample)
    session.flush()
    return sample


def job_samples(session: Session, job_id: str) -> Sequence[ReviewSample]:
    """The job's samples, newest first."""
    return session.scalars(
        select(ReviewSample)
        .where(ReviewSample.job_id == job_id)
        .order_by(ReviewSample.created_at.desc(), ReviewSample.id)
    ).all()


def sampled_trial_ids(session: Session, job_id: str) -> set[str]:
    """Every trial any of the job's samples drew."""
    return {trial_id for sample in job_samples(session, job_id) for trial_id in sample.trial_ids}


def add_review(session: Session, **values: Any) -> Review:
    review = Review(**values, created_at=now())
    session.add(review)
    session.flush()
    return review


def job_reviews(session: Session, job_id: str) -> Sequence[Review]:
    """Every review of the job's trials, oldest first (revisions included)."""
    return session.scalars(select(Review).where(Review.job_id == job_id).order_by(Review.id)).all()


def latest_reviews(reviews: Sequence[Review]) -> dict[str, Review]:
    """trial id -> its newest review, of `job_reviews`' rows."""
    return {review.trial_id: review for review in reviews}


def reviews_marker(session: Session, job_id: str) -> tuple[int, int, int]:
    """(reviews, newest review id, samples) of the job: changes with every review posted, and
    once there are reviews with every sample drawn (both append-only; the report's agreement
    counts what was sampled), so a kept report or page can tell it is stale. A sample alone
    changes no report."""
    count, newest = session.execute(
        select(func.count(Review.id), func.max(Review.id)).where(Review.job_id == job_id)
    ).one()
    if not count:
        return 0, 0, 0
    samples = session.scalar(
        select(func.count(ReviewSample.id)).where(ReviewSample.job_id == job_id)
    )
    return int(count), int(newest or 0), int(samples or 0)


def trials_by_id(session: Session, trial_ids: Sequence[str]) -> dict[str, Trial]:
    if not trial_ids:
        return {}
    found = session.scalars(select(Trial).where(Trial.id.in_(list(trial_ids))))
    return {trial.id: trial for trial in found}


def token_prefix(session: Session, token_sha256: str) -> str | None:
    """The prefix `examhall admin` lists a token by, or None for a token not in the store
    (the box's bootstrap admin token)."""
    return session.scalar(select(Token.prefix).where(Token.sha256 == token_sha256))
