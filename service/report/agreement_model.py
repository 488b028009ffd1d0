"""The report's human-review part: how often people agree with the judges
(`service.report.agreement` builds it). A report of a job nobody reviewed has none, and its
JSON, text and page are as they were before reviews existed."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class _Part(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class KappaView(_Part):
    """Cohen's kappa with its 95% interval (asymptotic standard error); None with a reason
    when the reviewed trials cannot give it."""

    value: float | None
    ci95: list[float] | None
    stderr: float | None
    reason: str | None


class Confusion(_Part):
    """Reviewed trials counted by the person's verdict and the judge's."""

    human_pass_judge_pass: int
    human_pass_judge_fail: int
    human_fail_judge_pass: int
    human_fail_judge_fail: int


class AgreementRow(_Part):
    """One judge (None: the trial's own verdict, passed or failed) in one variant ("all":
    every variant pooled) over the reviewed trials it scored."""

    judge: str | None
    variant: str
    reviewed: int
    percent_agreement: float
    kappa: KappaView
    confusion: Confusion
    human_pass_rate: float
    judge_pass_rate: float


class LiftCheck(_Part):
    """Whether the pairs (case, round) with both arms reviewed move the same way for people
    as for the trials' verdicts."""

    baseline: str
    candidate: str
    pairs_reviewed: int
    human_lift_pp: float | None
    judge_lift_pp: float | None
    # The comparison's published lift over all its pairs, None when withheld.
    headline_lift_pp: float | None
    confirms: bool | None
    finding: str


class Agreement(_Part):
    """The reviews of the job's sample of record against the judges; reviews made in
    samples a later draw retired are counted apart and left out."""

    sampled: int
    reviewed: int
    interval_method: str
    rows: list[AgreementRow]
    lift_checks: list[LiftCheck]
    notes: list[str]
    sample_id: str | None = Field(
        default=None, description="the job's sample of record, whose reviews are counted"
    )
    blind: bool | None = Field(
        default=None,
        description="whether its reviewers saw a trial's verdict only after reviewing it; "
        "null: drawn before migration 0022, when nothing was hidden nor recorded",
    )
    verdict_seen: int = Field(
        default=0,
        description="counted reviews whose reviewer had the verdict in view (all of a sample "
        "not blind; in a blind one a trial's counted review is its newest made without it, "
        "when there is one)",
    )
    scored_errors: int = Field(
        default=0,
        description="reviewed trials that are scored errors (agent_error, timeout, ...), "
        "whose trial verdict is a fail",
    )
    retired_samples: int = Field(
        default=0, description="retired samples (replaced by a later draw) with reviews"
    )
    retired_reviews: int = Field(
        default=0, description="reviews made in retired samples: kept, not counted"
    )
    counted: str = Field(
        default="", description="the above in a sentence, as the text and the page show it"
    )
