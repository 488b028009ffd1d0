"""Human review: a job's review sample, and people's reviews of its trials."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException, Request

from service.api.access import NOT_FOUND
from service.api.auth import Caller
from service.api.context import Ctx
from service.api.review_schemas import ReviewRequest, ReviewView, SampleRequest, SampleView
from service.api.reviewer import reviewer_of
from service.api.reviewing import (
    create_sample,
    job_review_views,
    post_review,
    record_sample,
    sample_view,
)
from service.api.schemas import ErrorBody

router = APIRouter()
_REFUSED = {**NOT_FOUND, 409: {"model": ErrorBody}, 422: {"model": ErrorBody}}


@router.post(
    "/jobs/{job_id}/review-sample",
    status_code=201,
    response_model=SampleView,
    responses=_REFUSED,
    summary="Draw a review sample",
    description="A seeded random sample of the job's scored trials (passed, failed and "
    "scored errors), stratified by variant and outcome (docs/guides/human-review.md gives "
    "the algorithm); blind unless `blind` is false. It becomes the job's sample of record. "
    "The job must have settled, and a job that has a sample of record answers 409 unless "
    "`replace` is true, which retires that one (its reviews stop counting).",
)
def draw_sample(
    job_id: str, body: SampleRequest, request: Request, c: Ctx, caller: Caller
) -> SampleView:
    with c.sessions.begin() as session:
        who = reviewer_of(session, request, caller, "api")
        return create_sample(session, caller, job_id, body, who)


@router.get(
    "/jobs/{job_id}/review-sample",
    response_model=SampleView,
    responses=NOT_FOUND,
    summary="The job's review sample of record",
    description="Each trial with its latest review in this sample; in a blind sample a "
    "trial's outcome is shown only to a token that has reviewed it.",
)
def get_sample(job_id: str, request: Request, c: Ctx, caller: Caller) -> SampleView:
    with c.sessions() as session:
        sample = record_sample(session, caller, job_id)
        if sample is None:
            raise HTTPException(
                404,
                f"Job {job_id} has no review sample yet; draw one with "
                f"POST /v1/jobs/{job_id}/review-sample and a size and seed.",
            )
        return sample_view(session, sample, reviewer_of(session, request, caller, "api"))


@router.get(
    "/jobs/{job_id}/reviews",
    response_model=list[ReviewView],
    responses=NOT_FOUND,
    summary="The job's reviews",
    description="The newest review of each reviewed trial of the sample of record; with "
    "history=true every review of every sample (retired ones too), revisions included, "
    "oldest first.",
)
def list_reviews(job_id: str, c: Ctx, caller: Caller, history: bool = False) -> list[ReviewView]:
    with c.sessions() as session:
        return job_review_views(session, caller, job_id, history=history)


@router.post(
    "/jobs/{job_id}/reviews",
    status_code=201,
    response_model=ReviewView,
    responses=_REFUSED,
    summary="Review a sampled trial",
    description="Pass or fail with a note, of a trial of the sample of record. A trial "
    "reviewed again keeps its earlier reviews as history; the newest counts.",
)
def add_review(
    job_id: str, body: ReviewRequest, request: Request, c: Ctx, caller: Caller
) -> ReviewView:
    with c.sessions.begin() as session:
        who = reviewer_of(session, request, caller, "api")
        return post_review(session, caller, job_id, body, who)
