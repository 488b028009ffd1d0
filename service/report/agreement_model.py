"""The report's human-review part: how often people agree with the judges
(`service.report.agreement` builds it). A report of a job nobody reviewed has none, and its
JSON, text and page are as they were before reviews existed."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


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
    sampled: int
    reviewed: int
    interval_method: str
    rows: list[AgreementRow]
    lift_checks: list[LiftCheck]
    notes: list[str]
