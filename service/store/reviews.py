"""Human review's SQL: a job's scored trials to sample from, the samples drawn (the one not
retired is the job's sample of record), and the reviews people gave in each (append-only: a
trial's newest review in a sample is its review there)."""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from service.review.sampling import ALGORITHM, Candidate, sampled_outcome
from service.store.clock import now
from service.store.models import Review, ReviewSample, Token, Trial


def scored_candidates(session: Session, job_id: str) -> list[Candidate]:
    """The job's planned trials' final attempts that are scored (passed, failed, or a scored
    error: `sampled_outcome`), in plan order."""
    rows = session.execute(
        select(
            Trial.id,
            Trial.variant,
            Trial.case_id,
            Trial.round,
            Trial.order,
            Trial.attempt,
            Trial.outcome,
            Trial.error_kind,
        ).where(Trial.job_id == job_id)
    )
    latest: dict[tuple[str, int], tuple[int, Candidate | None]] = {}
    for trial_id, variant, case_id, round_, order, attempt, outcome, error_kind in rows:
        key = (variant, order)
        if key not in latest or attempt > latest[key][0]:
            sampled = sampled_outcome(outcome, error_kind)
            found = (
                None
                if sampled is None
                else Candidate(trial_id, variant, case_id, round_, order, sampled)
            )
            latest[key] = (attempt, found)
    finals = [candidate for _, candidate in latest.values() if candidate is not None]
    return sorted(finals, key=lambda c: (c.order, c.variant))


def sample_of_record(session: Session, job_id: str) -> ReviewSample | None:
    """The job's sample not retired: the one its reviews count in."""
    return session.scalars(
        select(ReviewSample).where(ReviewSample.job_id == job_id, ReviewSample.retired_at.is_(None))
    ).first()


def add_sample(
    session: Session,
    job_id: str,
    size: int,
    seed: int,
    trial_ids: list[str],
    created_by: str,
    *,
    blind: bool = True,
    replaces: ReviewSample | None = None,
) -> ReviewSample:
    """A new sample of record; `replaces`, the one it was, is retired in the same
    transaction."""
    at = now()
    if replaces is not None:
        replaces.retired_at = at
        # Retired before the new one is inserted: the index of samples of record holds one.
        session.flush()
    sample = ReviewSample(
        id=f"sample-{secrets.token_hex(8)}",
        job_id=job_id,
        size=size,
        seed=seed,
        algorithm=ALGORITHM,
        trial_ids=trial_ids,
        created_by=created_by,
        created_at=at,
        blind=blind,
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


def add_review(session: Session, **values: Any) -> Review:
    review = Review(**values, created_at=now())
    session.add(review)
    session.flush()
    return review


def job_reviews(session: Session, job_id: str) -> Sequence[Review]:
    """Every review of the job's trials, oldest first (revisions included), of every
    sample."""
    return session.scalars(select(Review).where(Review.job_id == job_id).order_by(Review.id)).all()


def sample_reviews(session: Session, sample: ReviewSample) -> Sequence[Review]:
    """The reviews made in `sample`, oldest first."""
    return session.scalars(
        select(Review)
        .where(Review.job_id == sample.job_id, Review.sample_id == sample.id)
        .order_by(Review.id)
    ).all()


def latest_reviews(reviews: Sequence[Review]) -> dict[str, Review]:
    """trial id -> its newest review, of `job_reviews`' or `sample_reviews`' rows."""
    return {review.trial_id: review for review in reviews}


def reviews_marker(session: Session, job_id: str) -> tuple[int, int, int]:
    """(reviews, newest review id, samples) of the job: changes with every review posted, and
    once there are reviews with every sample drawn (both append-only; a draw retires the
    sample of record, whose reviews the report's agreement then stops counting), so a kept
    report or page can tell it is stale. A sample alone changes no report."""
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
