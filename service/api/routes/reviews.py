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
    latest_sample,
    post_review,
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
    description="A seeded random sample of the job's passed and failed trials, stratified by "
    "variant and outcome (docs/guides/human-review.md gives the algorithm). The job must "
    "have settled (409 otherwise). The newest sample is the job's review queue.",
)
def draw_sample(job_id: str, body: SampleRequest, c: Ctx, caller: Caller) -> SampleView:
    with c.sessions.begin() as session:
        return create_sample(session, caller, job_id, body)


@router.get(
    "/jobs/{job_id}/review-sample",
    response_model=SampleView,
    responses=NOT_FOUND,
    summary="The job's review sample",
)
def get_sample(job_id: str, c: Ctx, caller: Caller) -> SampleView:
    with c.sessions() as session:
        sample = latest_sample(session, caller, job_id)
        if sample is None:
            raise HTTPException(
                404,
                f"Job {job_id} has no review sample yet; draw one with "
                f"POST /v1/jobs/{job_id}/review-sample and a size and seed.",
            )
        return sample_view(session, sample)


@router.get(
    "/jobs/{job_id}/reviews",
    response_model=list[ReviewView],
    responses=NOT_FOUND,
    summary="The job's reviews",
    description="The newest review of each reviewed trial; with history=true every review, "
    "revisions included, oldest first.",
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
    description="Pass or fail with a note. A trial reviewed again keeps its earlier reviews "
    "as history; the newest counts.",
)
def add_review(
    job_id: str, body: ReviewRequest, request: Request, c: Ctx, caller: Caller
) -> ReviewView:
    with c.sessions.begin() as session:
        who = reviewer_of(session, request, caller, "api")
        return post_review(session, caller, job_id, body, who)
