"""Request and response bodies of the HTTP API."""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StrictFloat,
    StrictInt,
    field_validator,
)

from sandbox.prompt import section_marker
from sandbox.protocol import ErrorKind
from sandbox.tools import TOOLS


def _as_utc(value: datetime) -> datetime:
    return value if value.tzinfo else value.replace(tzinfo=UTC)


# The store keeps naive UTC; on the wire a time carries its offset, as RFC 3339 requires.
Timestamp = Annotated[datetime, AfterValidator(_as_utc)]


class UploadedSuite(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9_.-]+$")
    source: str = Field(min_length=1, max_length=1024 * 1024)


class ModelSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")
    provider: str = Field(
        min_length=1, description="faux, simulated, or a provider of the box's providers file"
    )
    id: str = Field(min_length=1, description="e.g. solution (faux), coin?p=0.85, gpt-4o")


MAX_TIMEOUT_S = 24 * 3600.0


class JobLimits(BaseModel):
    model_config = ConfigDict(extra="forbid")
    timeout_s: StrictFloat = Field(
        default=600.0, description=f"wall-clock deadline per trial, seconds (<= {MAX_TIMEOUT_S:g})"
    )
    max_turns: StrictInt = Field(default=50, ge=1, le=10_000)
    max_tokens: StrictInt | None = Field(
        default=None, ge=1, description="per-trial budget of input + output tokens (relay)"
    )
    max_cost_usd: StrictFloat | None = Field(
        default=None, gt=0, le=1e6, description="per-trial budget in dollars (priced models)"
    )
    max_requests: StrictInt | None = Field(
        default=None, ge=1, description="per-trial budget of model requests (relay)"
    )

    @field_validator("timeout_s")
    @classmethod
    def positive_finite(cls, value: float) -> float:
        if not math.isfinite(value) or not 0 < value <= MAX_TIMEOUT_S:
            raise ValueError(
                f"timeout_s must be a positive finite number of seconds, at most {MAX_TIMEOUT_S:g}"
            )
        return float(value)


VARIANT_NAME = r"^[A-Za-z0-9_.-]{1,64}$"
DOC_NAME = r"^[A-Za-z0-9_.-]{1,100}\.md$"
MAX_DOCS_BYTES = 1024 * 1024


class DocsBundle(BaseModel):
    model_config = ConfigDict(extra="forbid")
    files: dict[str, str] = Field(description="markdown files: name.md -> content")

    @field_validator("files")
    @classmethod
    def markdown_files(cls, value: dict[str, str]) -> dict[str, str]:
        if not value:
            raise ValueError("a docs bundle needs at least one file")
        for name in value:
            if not re.match(DOC_NAME, name):
                raise ValueError(f"docs file name {name!r} must be a plain NAME.md")
        if sum(len(v.encode()) for v in value.values()) > MAX_DOCS_BYTES:
            raise ValueError(f"the docs bundle is larger than {MAX_DOCS_BYTES} bytes")
        for name, content in value.items():
            if marker := section_marker(content):
                raise ValueError(
                    f"docs file {name} has a line {marker!r}, which would read as a section of "
                    "the system prompt; indent it or put it in a code span"
                )
        return value


class Harness(BaseModel):
    """How the agent runs in one variant; unset fields take the job's values."""

    model_config = ConfigDict(extra="forbid")
    model: ModelSpec | None = None
    tools: list[str] | None = Field(default=None, description="tool names; default the case's")
    docs: bool = Field(default=False, description="put the job's docs bundle in the prompt")
    rules: str | None = Field(
        default=None, max_length=20_000, description="replaces the default <rules> text"
    )
    limits: JobLimits | None = None
    command: list[str] | None = Field(
        default=None,
        min_length=1,
        description="an external agent's argv, run in the sandbox instead of the built-in "
        "agent; {task} stands for the case's prompt; it reaches the model through "
        "OPENAI_BASE_URL and OPENAI_API_KEY",
    )

    @field_validator("rules")
    @classmethod
    def no_section_lines(cls, value: str | None) -> str | None:
        if value is not None and (marker := section_marker(value)):
            raise ValueError(
                f"rules has a line {marker!r}, which would read as a section of the system "
                "prompt; the <docs> section comes from the job's docs"
            )
        return value

    @field_validator("tools")
    @classmethod
    def known_tools(cls, value: list[str] | None) -> list[str] | None:
        for name in value or []:
            if name not in TOOLS:
                raise ValueError(f"unknown tool {name!r}; known: {', '.join(sorted(TOOLS))}")
        return value


class JobRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    suite: str | UploadedSuite = Field(
        description="a shipped suite name (e.g. smoke) or an uploaded {name, source}"
    )
    cases: list[str] | None = Field(default=None, description="case ids; all cases if omitted")
    model: ModelSpec | None = Field(
        default=None, description="the model; required unless every variant names its own"
    )
    variants: dict[str, Harness] | None = Field(
        default=None, description="named harnesses; with two or more, `baseline` names one"
    )
    baseline: str | None = Field(default=None, description="the variant others are compared to")
    comparison: Literal["docs-lift"] | None = Field(
        default=None, description="preset: without_docs (baseline) vs with_docs (candidate)"
    )
    docs: DocsBundle | str | None = Field(
        default=None, description="a docs bundle {files: {...}} or a docs set the box has"
    )
    rounds: StrictInt = Field(default=1, ge=1, le=1000, description="k: repetitions per case")
    limits: JobLimits = Field(default_factory=JobLimits)
    seed: StrictInt = Field(default=0, ge=0, le=2**32 - 1)
    credentials: Literal["relay", "direct"] = Field(
        default="relay",
        description="relay: keys stay in the control plane and the sandbox has no network; "
        "direct: the key is sent to the worker's memory and the sandbox gets an egress network",
    )
    max_infra_retries: StrictInt = Field(default=1, ge=0, le=10)

    @field_validator("variants")
    @classmethod
    def variant_names(cls, value: dict[str, Harness] | None) -> dict[str, Harness] | None:
        if value is not None:
            if not value:
                raise ValueError("variants must name at least one variant, or be omitted")
            for name in value:
                if not re.match(VARIANT_NAME, name):
                    raise ValueError(f"variant name {name!r} must match {VARIANT_NAME}")
        return value

    @field_validator("cases")
    @classmethod
    def non_empty(cls, value: list[str] | None) -> list[str] | None:
        if value is not None and not value:
            raise ValueError("cases must name at least one case, or be omitted for all cases")
        if value is not None and len(set(value)) != len(value):
            raise ValueError("cases lists a case twice")
        return value


class JobCreated(BaseModel):
    id: str
    planned_trials: int
    status: str


class TrialCounts(BaseModel):
    """Planned trials by their latest attempt; `attempts` counts every attempt."""

    attempts: int = 0
    queued: int = 0
    running: int = 0
    finished: int = 0
    passed: int = 0
    failed: int = 0
    error: int = 0


class JobView(BaseModel):
    id: str
    status: Literal["queued", "running", "finished", "cancelled"]
    # The submitting team; null for jobs submitted with an admin token.
    team: str | None = None
    suite: str
    suite_sha256: str
    spec: dict[str, Any]
    planned_trials: int
    counts: TrialCounts
    created_at: Timestamp
    finished_at: Timestamp | None


class TrialView(BaseModel):
    id: str
    job_id: str
    case_id: str
    variant: str
    round: int
    order: int
    attempt: int
    status: Literal["queued", "running", "finished"]
    outcome: Literal["passed", "failed", "error"] | None
    score: float | None
    error_kind: ErrorKind | None
    error_message: str | None
    failed_step: str | None
    model_requested: str | None
    model_returned: str | None
    tool_calls: int | None
    system_prompt_sha256: str | None
    limits_hit: list[str] | None
    usage: dict[str, Any] | None
    judges: list[Any] | None
    timings: dict[str, Any] | None
    container_id: str | None
    started_at: Timestamp | None
    finished_at: Timestamp | None
    wall_s: float | None
    artifacts: list[str] = Field(default_factory=list)


class EventView(BaseModel):
    seq: int
    type: str
    payload: dict[str, Any]


class ErrorDetail(BaseModel):
    loc: list[str | int]
    msg: str
    type: str = "value_error"


class ErrorBody(BaseModel):
    detail: list[ErrorDetail] | str
