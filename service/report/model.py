"""The job report's types.

`build_report` returns a `Report`; `GET /v1/jobs/{id}/report` serves its dump, and the
endpoint's OpenAPI schema is generated from these classes; the text renderer
(`service.report.render_text`) and the web pages read them. There is no other description
of the report's shape.

The field order of each class is the key order of its JSON. Every class is frozen: a settled
job's report is cached and shared between callers (`service.report.from_store`).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, SkipValidation, WithJsonSchema, with_config
from typing_extensions import TypedDict

from service.domain.status import JobStatus
from service.report.agreement_model import Agreement

SCHEMA_VERSION = 1

# A sum of measurements: counts (tokens, tool calls) stay integers, seconds and dollars are
# floats. Kept as they are (not coerced to float), so a token total reads 1234, not 1234.0.
Number = Annotated[int | float, WithJsonSchema({"type": "number"})]

Flag = Literal["no-lift", "negative-delta", "control-saturated", "treatment-saturated", "flaky"]


class _Part(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class MetricView(_Part):
    """One rate with its uncertainty; a None is explained by `reason`."""

    value: float | None
    ci95: list[float] | None
    stderr_clustered: float | None
    reason: str | None
    cases_used: int


class Outcomes(_Part):
    """A variant's planned trials by their final attempt, and its error kinds."""

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


@with_config(ConfigDict(extra="forbid"))
class CaseRow(TypedDict):
    """One case's rates in a variant. A dict, not a model, as `PairOrder` is: a report holds
    one per case and variant. Read it and never change it."""

    case: str
    n: int
    passes: int
    pass_at_1: float | None
    pass_hat_k: float | None
    pass_at_k: float | None


class JudgeRate(_Part):
    """One judge's own pass rate in a variant: the share of the scored trials that recorded
    it in which it scored 1 (whatever the case's rule made of the trial)."""

    name: str
    passed: int
    scored: int
    pass_rate: float | None


class VariantReport(_Part):
    name: str
    pass_at_1: MetricView
    pass_hat_k: MetricView
    pass_at_k: MetricView
    scored_trials: int
    outcomes: Outcomes
    # Built by `build` as the type says and not checked again: 10,000 rows of a large
    # report cost more to validate than to make (tests check them, test_report_shape).
    cases: SkipValidation[list[CaseRow]]
    # By judge name; empty while no scored trial has recorded a judge.
    judges: list[JudgeRate] = []


class BlockedPair(_Part):
    case: str
    round: int
    reasons: list[str]


class ArmPassHatK(_Part):
    baseline: float | None
    candidate: float | None


class Headline(_Part):
    """A complete design's result: published only when no pair is blocked."""

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


class Delta(_Part):
    """A paired delta over the pairs where both sides measured it."""

    mean_delta: float
    candidate_mean: float
    baseline_mean: float
    pairs_measured: int
    coverage: str


class DeltaUnavailable(_Part):
    """No pair had the measurement on both sides: unavailable, never zero."""

    mean_delta: None
    status: Literal["unavailable"]
    coverage: str


class Total(_Part):
    total: Number
    trials_measured: int
    coverage: str


class TotalUnavailable(_Part):
    total: None
    status: Literal["unavailable"]
    coverage: str


class ArmTotals(_Part):
    """What an arm's trials spent, every attempt counted (blocked or retried ones too)."""

    trials: int
    tokens: Total | TotalUnavailable
    tool_calls: Total | TotalUnavailable
    latency_s: Total | TotalUnavailable
    cost_usd: Total | TotalUnavailable


@with_config(ConfigDict(extra="forbid"))
class PairOrder(TypedDict):
    """Which arm ran first in one pair. A dict, not a model: a docs-lift report holds one per
    (case, round), and 50,000 models cost a large report more than its bootstrap. Like the
    models, read it and never change it (reports are cached and shared)."""

    case: str
    round: int
    first: str | None


class FlakyCases(_Part):
    baseline: list[str]
    candidate: list[str]


class Deltas(_Part):
    tokens: Delta | DeltaUnavailable
    tool_calls: Delta | DeltaUnavailable
    latency_s: Delta | DeltaUnavailable
    cost_usd: Delta | DeltaUnavailable


# The telemetry of Deltas and ArmTotals, in report order.
TELEMETRY = ("tokens", "tool_calls", "latency_s", "cost_usd")


class Comparison(_Part):
    baseline: str
    candidate: str
    pairs_total: int
    pairs_eligible: int
    blocked: list[BlockedPair]
    headline: Headline | None
    withheld_reason: str | None
    flags: list[Flag]
    flaky_cases: FlakyCases
    deltas: Deltas
    totals: dict[str, ArmTotals]
    # As `cases`: one per (case, round), 50,000 in a large comparison, made by `paired`.
    order: SkipValidation[list[PairOrder]]
    # The distinct system prompts each arm's final attempts saw: proof the arms differed.
    system_prompt_sha256: dict[str, list[str]]


class EnvironmentImage(_Part):
    """The image a case's trials of one variant ran in, when it was not the job's own (a
    task's environment, or an agent installed over the API)."""

    case: str
    variant: str
    image: str
    image_digest: str | None


class UnbuiltTask(_Part):
    """A case whose environment did not build: its trials never ran and score nothing."""

    case: str
    step: str | None  # the build's step that failed ("Step 3/5"), when one did
    error: str  # the build's error, with its log's last lines


class TaskNetwork(_Part):
    """A task that asked for a network (as Harbor's task.toml says) and what it ran with."""

    case: str
    wanted: str  # "public", or "allowlist: HOST, ..."
    ran: str  # the job's egress policy: "offline", or the operator's policy it ran under


class Bootstrap(_Part):
    """How the report's bootstrap intervals drew their resamples: the method's version is
    the job's, fixed when it was submitted, so a recomputed report keeps its intervals."""

    version: int
    generator: str
    resamples: int


class JudgeRubric(_Part):
    """A model-graded judge's rubric, by the sha256 of its text."""

    judge: str
    rubric_sha256: str


class Record(_Part):
    service_version: str
    image: str
    image_digest: str | None
    environments: list[EnvironmentImage] = []
    unbuilt: list[UnbuiltTask] = []
    networks: list[TaskNetwork] = []
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
    bootstrap: Bootstrap
    planned_trials: int
    # Model-graded judges: the job's judge model and the rubrics its trials were graded by.
    judge_model: str | None = None
    judge_rubrics: list[JudgeRubric] = []


class Report(_Part):
    schema_version: int
    job: str
    status: JobStatus
    k: int
    variants: list[VariantReport]
    comparisons: list[Comparison]
    notes: list[str]
    record: Record
    # People's reviews against the judges; None (and left out of the JSON, see `report_json`)
    # when nobody reviewed, so such a report reads exactly as before.
    agreement: Agreement | None = None


def report_json(report: Report) -> dict[str, Any]:
    """The report as the API serves it."""
    absent = {"agreement"} if report.agreement is None else None
    return report.model_dump(mode="json", exclude=absent)
