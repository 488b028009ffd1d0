"""Request and response bodies of the HTTP API."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, Field

from sandbox.protocol import ErrorKind
from service.domain.builds import TaskBuild
from service.domain.status import JobStatus, Outcome, TrialStatus


def _as_utc(value: datetime) -> datetime:
    return value if value.tzinfo else value.replace(tzinfo=UTC)


# What a worker may report, and what the control plane alone writes: a task whose
# environment did not build (service/domain/status.py). The channel never accepts the latter.
TrialErrorKind = ErrorKind | Literal["build_error"]

# The store keeps naive UTC; on the wire a time carries its offset, as RFC 3339 requires.
Timestamp = Annotated[datetime, AfterValidator(_as_utc)]


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
    status: JobStatus
    # The submitting team; null for jobs submitted with an admin token.
    team: str | None = None
    suite: str
    suite_sha256: str
    spec: dict[str, Any]
    planned_trials: int
    counts: TrialCounts
    created_at: Timestamp
    finished_at: Timestamp | None
    # Why the job ended without running (a task environment that did not build), or null.
    error: str | None = None
    # Each task's environment build (task id -> its build), once the job's builds began;
    # null for a job with none.
    builds: dict[str, TaskBuild] | None = None
    # At most this many of its trials run at once; null: as the box's and team's caps allow.
    concurrency: int | None = None


class TrialView(BaseModel):
    id: str
    job_id: str
    case_id: str
    variant: str
    round: int
    order: int
    attempt: int
    status: TrialStatus
    outcome: Outcome | None
    score: float | None
    error_kind: TrialErrorKind | None
    error_message: str | None
    failed_step: str | None
    # A task suite's trial runs in its environment's image; null: the job's sandbox image.
    image: str | None = None
    image_digest: str | None = None
    model_requested: str | None
    model_returned: str | None
    tool_calls: int | None
    system_prompt_sha256: str | None
    limits_hit: list[str] | None
    usage: dict[str, Any] | None
    judges: list[Any] | None
    timings: dict[str, Any] | None
    container_id: str | None
    # The machine it ran on: a swarm node, or the Docker engine's name.
    node: str | None = None
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


class RefusedTask(BaseModel):
    task: str
    problems: list[str] = Field(description="what to fix, one line each")


class SuiteView(BaseModel):
    """An uploaded suite tree, by its content address."""

    id: str = Field(description="sha256:<hex> of the archive as uploaded; jobs name it as suite")
    name: str
    kind: str = Field(description="harbor: a directory of Harbor tasks")
    files: int = Field(description="files in the tree (links inside it count as copies)")
    bytes: int = Field(description="size of the archive as uploaded")
    tasks: list[str] = Field(description="the tasks that loaded, which a job may run")
    refused: list[RefusedTask] = Field(
        description="the tasks that did not load, each with why; the others are kept"
    )
    version: str | None = Field(
        default=None,
        description="the task set version this upload was pushed as (name@version), if any",
    )


class TaskSetVersionView(BaseModel):
    version: str
    id: str = Field(description="sha256:<hex> of the version's archive: its contents")
    pushed_at: datetime


class TaskSetView(BaseModel):
    """A named task set the caller may read, and its versions, oldest push first."""

    name: str
    owner: str = Field(description="the team that pushed it (admin: an admin token)")
    ref: str = Field(
        description="what a job's suite names for its newest version: NAME, or OWNER/NAME for "
        "a set another owner shared; add @VERSION for another"
    )
    versions: list[TaskSetVersionView]
    shared_with: list[str] | None = Field(
        default=None,
        description="the teams an admin shared it with; shown to its owner and admins only",
    )
