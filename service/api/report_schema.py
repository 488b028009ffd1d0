"""The report's JSON shape, for the OpenAPI schema. Reports are built as plain dicts by
service/report; tests validate real reports against these models (extra fields forbidden),
so the documented shape cannot drift from what the endpoint returns."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class MetricView(_Strict):
    value: float | None
    ci95: list[float] | None
    stderr_clustered: float | None
    reason: str | None
    cases_used: int


class Outcomes(_Strict):
    passed: int
    failed: int
    error: int
    unfinished: int
    error_kinds: dict[str, int]
    counted_as_failed: int
    excluded: int
    limits_hit: dict[str, int]
    attempts: int
    retried_attempts: int


class CaseRow(_Strict):
    case: str
    n: int
    passes: int
    pass_at_1: float | None
    pass_hat_k: float | None
    pass_at_k: float | None


class VariantReport(_Strict):
    name: str
    pass_at_1: MetricView
    pass_hat_k: MetricView
    pass_at_k: MetricView
    scored_trials: int
    outcomes: Outcomes
    cases: list[CaseRow]


class BlockedPair(_Strict):
    case: str
    round: int
    reasons: list[str]


class ArmPassHatK(_Strict):
    baseline: float | None
    candidate: float | None


class Headline(_Strict):
    cases: int
    baseline_pass_rate: float
    candidate_pass_rate: float
    lift_pp: float
    lift_ci95_pp: list[float] | None
    lift_ci95_reason: str | None
    lift_ci95_method: str | None
    seed: int
    resamples: int
    wins: int
    ties: int
    losses: int
    mcnemar_midp: float
    mcnemar_note: str | None
    mde_pp: float | None
    mde_reason: str | None
    k: int
    pass_hat_k: ArmPassHatK
    pass_hat_k_reason: str | None


class Delta(_Strict):
    mean_delta: float | None
    coverage: str
    candidate_mean: float | None = None
    baseline_mean: float | None = None
    pairs_measured: int | None = None
    status: Literal["unavailable"] | None = None


class Total(_Strict):
    total: float | None
    coverage: str
    trials_measured: int | None = None
    status: Literal["unavailable"] | None = None


class ArmTotals(_Strict):
    trials: int
    tokens: Total
    tool_calls: Total
    latency_s: Total
    cost_usd: Total


class PairOrder(_Strict):
    case: str
    round: int
    first: str | None


class FlakyCases(_Strict):
    baseline: list[str]
    candidate: list[str]


class Deltas(_Strict):
    tokens: Delta
    tool_calls: Delta
    latency_s: Delta
    cost_usd: Delta


class Comparison(_Strict):
    baseline: str
    candidate: str
    pairs_total: int
    pairs_eligible: int
    blocked: list[BlockedPair]
    headline: Headline | None
    withheld_reason: str | None
    flags: list[
        Literal["no-lift", "negative-delta", "control-saturated", "treatment-saturated", "flaky"]
    ]
    flaky_cases: FlakyCases
    deltas: Deltas
    totals: dict[str, ArmTotals]
    order: list[PairOrder]
    system_prompt_sha256: dict[str, list[str]]


class Record(_Strict):
    service_version: str
    image: str
    image_digest: str | None
    suite: str
    suite_sha256: str
    docs: str | None
    docs_sha256: str | None
    baseline: str | None
    arms: list[str]
    model_requested: str
    models_returned: list[str]
    submitted_at: str
    generated_at: str
    k: int
    cases: list[str]
    seed: int
    planned_trials: int


class Report(_Strict):
    schema_version: int
    job: str
    status: Literal["queued", "running", "finished", "cancelled"]
    k: int
    variants: list[VariantReport]
    comparisons: list[Comparison]
    notes: list[str]
    record: Record
