"""A job as it is asked for (`JobRequest`, the body of `POST /v1/jobs`) and as it is kept
(`JobSpec`, the job row's `spec`): the contract between the planner, the scheduler, the
API and the reports.

A request names what it wants in the fewest words (a variant without a model takes the job's);
the stored spec is resolved, so that everything downstream reads one typed shape and never
falls back on defaults of its own.
"""

from __future__ import annotations

import math
import re
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictFloat,
    StrictInt,
    field_validator,
)

from sandbox.prompt import section_marker
from sandbox.tools import TOOLS
from service.domain.agents import AgentEnvironment

Credentials = Literal["relay", "direct"]


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


class JudgeLimits(BaseModel):
    """The judge model's budget per trial, apart from the agent's."""

    model_config = ConfigDict(extra="forbid")
    max_tokens: StrictInt | None = Field(
        default=None, ge=1, description="per-trial budget of the judge model's tokens"
    )
    max_cost_usd: StrictFloat | None = Field(
        default=None, gt=0, le=1e6, description="per-trial judge budget in dollars (priced)"
    )
    max_requests: StrictInt | None = Field(
        default=20, ge=1, description="per-trial budget of judge model requests"
    )


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
    agent: Literal["oracle", "nop"] | AgentEnvironment | None = Field(
        default=None,
        description="instead of the built-in loop: oracle (a task suite's solution/solve.sh; "
        "a sound task passes) or nop (does nothing; a sound task fails), which call no "
        'model; or an agent to install, examhall\'s catalogue ({"catalogue": "llm"}) or '
        "pinned pip requirements with its command, reaching the model through the relay",
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


# The egress policy that allows nothing: a task that asks for a network runs offline.
OFFLINE = "offline"

# The version of the bootstrap's draws a new job's report uses (service/report/resampling.py
# defines each version): fixed in the job's spec at submission, so a recomputed report keeps
# its intervals.
BOOTSTRAP_VERSION = 3


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
    credentials: Credentials = Field(
        default="relay",
        description="relay: keys stay in the control plane and the sandbox has no network; "
        "direct: the key is sent to the worker's memory and the sandbox gets an egress network",
    )
    max_infra_retries: StrictInt = Field(default=1, ge=0, le=10)
    judge_model: ModelSpec | None = Field(
        default=None,
        description="the model of model-graded judges (simulated/grader?... or a provider's), "
        "reached through the control plane's gateway only",
    )
    judge_limits: JudgeLimits = Field(default_factory=JudgeLimits)
    egress: str = Field(
        default=OFFLINE,
        max_length=40,
        description="the box's egress policy (EXAMHALL_EGRESS_POLICIES) that a task suite's "
        "tasks asking for a network run under; offline (the default) reaches nothing",
    )
    concurrency: StrictInt | None = Field(
        default=None,
        ge=1,
        le=100_000,
        description="at most this many of the job's trials run at once (at most the team's "
        "container cap); unset: as many as the box's and the team's caps allow",
    )
    priority: StrictInt = Field(
        default=0,
        ge=-100,
        le=100,
        description="within its team's turns at the queue, a job of higher priority is served "
        "first, then the older; teams take turns by their shares whatever their priorities",
    )

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


def _known_limits(value: Any) -> Any:
    """A stored row's limits without keys this version does not know: requests are strict
    (a typo is a 422), what earlier versions stored is read as far as it is understood."""
    if isinstance(value, dict):
        return {k: v for k, v in value.items() if k in JobLimits.model_fields}
    return value


StoredLimits = Annotated[JobLimits, BeforeValidator(_known_limits)]


class VariantSpec(BaseModel):
    """One variant's harness, resolved: its model and limits are always set."""

    model_config = ConfigDict(extra="ignore")
    model: ModelSpec
    tools: list[str] | None = None
    docs: bool = False
    rules: str | None = None
    command: list[str] | None = None
    # "oracle" or "nop", or an AgentEnvironment's fields: the agent installed for this variant.
    agent: str | dict[str, Any] | None = None
    limits: StoredLimits

    def budget(self) -> dict[str, Any]:
        """The per-trial model budget this variant's limits set (relay and direct alike)."""
        return {
            key: value
            for key, value in self.limits.model_dump().items()
            if key in ("max_tokens", "max_cost_usd", "max_requests") and value is not None
        }


class JobSpec(BaseModel):
    """What a stored job runs, as the planner resolved it from its request."""

    # Rows written by earlier versions may carry keys this one no longer reads.
    model_config = ConfigDict(extra="ignore")
    # In the order earlier versions wrote them, so a stored spec reads back key for key.
    cases: list[str]
    model: ModelSpec | None = None
    baseline: str | None = None
    comparison: Literal["docs-lift"] | None = None
    rounds: int = 1
    limits: StoredLimits = Field(default_factory=JobLimits)
    seed: int = 0
    credentials: Credentials = "relay"
    max_infra_retries: int = 1
    variants: dict[str, VariantSpec]
    # The variants in report order: the baseline first, then the candidates as given.
    arms: list[str]
    docs: dict[str, str] | None = None
    docs_name: str | None = None
    docs_sha256: str | None = None
    # A Python suite's cases that run in an environment of their own: case id -> its spec.
    environments: dict[str, dict[str, Any]] | None = None
    # A task suite's tasks that ask for a network, and what they ask for ("public", or
    # "allowlist: HOST, ..."): each runs under the job's egress policy, and the report says so.
    networks: dict[str, str] | None = None
    egress: str = OFFLINE
    # The version of the bootstrap's draws its report uses (`service.report.resampling`):
    # fixed at submission, so a recomputed report keeps its intervals. Jobs stored before
    # versions existed have none: version 1.
    bootstrap: int = 1
    judge_model: ModelSpec | None = None
    judge_limits: JudgeLimits = Field(default_factory=JudgeLimits)
    concurrency: int | None = None
    priority: int = 0

    def variant(self, name: str) -> VariantSpec:
        return self.variants[name]

    def model_text(self) -> str:
        """The job's model(s) in one line: `provider/id`, or `variant: provider/id, ...`."""
        names = {name: f"{v.model.provider}/{v.model.id}" for name, v in self.variants.items()}
        if len(set(names.values())) == 1:
            return next(iter(names.values()))
        return ", ".join(f"{name}: {model}" for name, model in names.items())
