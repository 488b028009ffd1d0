"""The review API's bodies: a sample to draw, a review to record, and what is read back."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from service.api.schemas import Timestamp

MAX_SAMPLE = 1000
MAX_NOTE = 4000
MAX_REVIEWER = 100


class SampleRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    # Strict: JSON's true is no size (the web form's text is turned into numbers first).
    size: int = Field(
        strict=True, ge=1, le=MAX_SAMPLE, description="trials to draw (all when fewer)"
    )
    seed: int = Field(
        strict=True, ge=0, le=2**32 - 1, description="the same seed and job give the same sample"
    )
    blind: bool = Field(
        default=True,
        strict=True,
        description="hide the judges' verdicts from each reviewer until they have reviewed "
        "the trial; false shows them from the start (the report says which)",
    )
    replace: bool = Field(
        default=False,
        strict=True,
        description="retire the job's sample of record (its reviews stop counting) and draw "
        "this one instead; without it, a job that has one answers 409",
    )


class ReviewRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    trial_id: str = Field(min_length=1, max_length=40, description="a trial of the job's samples")
    verdict: Literal["pass", "fail"]
    note: str = Field(default="", max_length=MAX_NOTE)
    reviewer: str = Field(
        default="",
        max_length=MAX_REVIEWER,
        description="the person's name: a team's tokens are shared, so the token alone does "
        "not say who",
    )

    @field_validator("note", "reviewer")
    @classmethod
    def _printable(cls, value: str, info: ValidationInfo) -> str:
        # A line break may stand in a note; no other control character (PostgreSQL's text
        # cannot even hold NUL), so every store keeps exactly what was sent.
        allowed = "\n\r\t" if info.field_name == "note" else ""
        for char in value:
            if (ord(char) < 32 or ord(char) == 127) and char not in allowed:
                raise ValueError(
                    f"{info.field_name} holds the control character U+{ord(char):04X}; "
                    "send printable text" + (" (line breaks and tabs may stand)" if allowed else "")
                )
        return value


class ReviewView(BaseModel):
    id: int
    trial_id: str
    case_id: str
    variant: str
    round: int
    verdict: Literal["pass", "fail"]
    note: str
    reviewer: str
    team: str = Field(description="the reviewing token's team, or admin")
    token_prefix: str | None = Field(description="the token's prefix; None: the box's admin token")
    via: Literal["api", "web"]
    created_at: Timestamp
    revises: int | None = Field(
        description="the review of the same trial, in the same sample, this one replaced"
    )
    sample_id: str = Field(description="the sample it was made in")
    verdict_seen: bool | None = Field(
        description="whether the reviewer had the judges' verdict in view when saving it (a "
        "sample drawn not blind, or a revision of their own review); None: made before "
        "samples recorded it"
    )


class SampledTrial(BaseModel):
    trial_id: str
    case_id: str
    variant: str
    round: int
    verdict_shown: bool = Field(
        description="false while the sample is blind and you have not reviewed this trial: "
        "`outcome` and `error_kind` are then null"
    )
    outcome: Literal["passed", "failed", "error"] | None = Field(
        description="the trial's outcome; a scored error (`error_kind`) counts as failed"
    )
    error_kind: str | None = Field(description="a scored error's kind (agent_error, timeout, ...)")
    review: ReviewView | None = Field(description="its latest review in this sample, if any")


class SampleView(BaseModel):
    id: str
    job_id: str
    size: int = Field(description="as requested; `trials` may be fewer")
    seed: int
    algorithm: int
    blind: bool | None = Field(
        description="whether the judges' verdicts are hidden until each reviewer reviews; "
        "None: drawn before blindness existed (nothing was hidden)"
    )
    created_by: str
    created_at: Timestamp
    retired_at: Timestamp | None = Field(
        description="when a later draw replaced it; None: the job's sample of record"
    )
    reviews: int = Field(description="reviews made in it, revisions included")
    trials: list[SampledTrial]
