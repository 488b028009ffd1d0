"""A Harbor task's `task.toml`, as a typed model.

Written from Harbor's own task model (harbor.models.task.config, 0.26) so that real task
directories load as they are: the same sections, field names, defaults and legacy spellings
(`version` for `schema_version`, `memory = "2G"` for `memory_mb`, `allow_internet` for
`network_mode`). Keys this model does not know are ignored, as Harbor ignores them; the ones it
knows are type-checked, so a typo in a value is an error and not a silent default.

This module only describes the file. What examhall can and cannot honour of it is
`service/suites/harbor/limits.py`'s business: every feature Harbor has is modelled here (GPUs, MCP
servers, steps...) precisely so that limits.py can refuse it by name instead of ignoring it.
"""

from __future__ import annotations

import math
import re
import tomllib
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from service.nesting import too_deep, value_depth_exceeds

# Harbor's package name: org/name (harbor.constants.ORG_NAME_PATTERN).
PACKAGE_NAME = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9._-]*/[a-zA-Z0-9][a-zA-Z0-9._-]*$")

NetworkMode = Literal["no-network", "public", "allowlist"]


def _user(value: Any) -> Any:
    # One message instead of pydantic's one per member of str | int; a bool is neither.
    if value is not None and (isinstance(value, bool) or not isinstance(value, str | int)):
        raise ValueError("must be a user name or a uid (an integer)")
    return value


def _number(value: Any) -> Any:
    # TOML has booleans; pydantic's lax mode would read `true` as 1.
    if isinstance(value, bool):
        raise ValueError("must be a number, not a boolean")
    return value


User = Annotated[str | int, BeforeValidator(_user)]
Number = Annotated[float, BeforeValidator(_number)]
Count = Annotated[int, BeforeValidator(_number)]


class _Section(BaseModel):
    # Harbor's models set no `extra`, so pydantic's default applies: unknown keys are dropped.
    model_config = ConfigDict(extra="ignore")


def _parse_size_to_mb(value: str) -> int:
    """Harbor's reading of a legacy size ("2G", "512M", "1024K"): whole megabytes."""
    text = value.strip().upper()
    units = {"G": 1024.0, "M": 1.0, "K": 1 / 1024}
    if not text or text[-1] not in units:
        raise ValueError(f"{value!r} is not a size; write it like '2G', '512M' or '1024K'")
    try:
        number = float(text[:-1])
    except ValueError:
        raise ValueError(
            f"{value!r} is not a size; write it like '2G', '512M' or '1024K'"
        ) from None
    if not math.isfinite(number) or number < 0:
        raise ValueError(f"{value!r} is not a size; give a non-negative number before the unit")
    return int(number * units[text[-1]])


class Author(_Section):
    name: str
    email: str | None = None


class PackageInfo(_Section):
    """[task]: the task's name in the registry, org/name."""

    name: str
    version: str | None = Field(default=None, min_length=1)
    description: str = ""
    authors: list[Author] = Field(default_factory=list)
    keywords: list[str] = Field(default_factory=list)

    @field_validator("name")
    @classmethod
    def org_slash_name(cls, value: str) -> str:
        if not PACKAGE_NAME.match(value) or ".." in value:
            raise ValueError(
                f"{value!r} is not a package name: write it as org/name (letters, digits, "
                "'.', '_', '-'; no leading dot, no '..')"
            )
        return value

    @property
    def short_name(self) -> str:
        return self.name.split("/")[1]


class _PhaseNetwork(_Section):
    """A phase's ([agent], [verifier]) override of the environment's network policy."""

    network_mode: NetworkMode | None = None
    allowed_hosts: list[str] | None = None


class AgentConfig(_PhaseNetwork):
    timeout_sec: Number | None = None
    user: User | None = None


class HealthcheckConfig(_Section):
    command: str
    interval_sec: Number = 5.0
    timeout_sec: Number = 30.0
    start_period_sec: Number = 0.0
    start_interval_sec: Number = 5.0
    retries: Count = 3


class TpuSpec(_Section):
    type: str = Field(min_length=1)
    topology: str


class MCPServerConfig(_Section):
    name: str
    transport: str = "sse"
    url: str | None = None
    command: str | None = None
    args: list[str] = Field(default_factory=list)


class EnvironmentConfig(_Section):
    build_timeout_sec: Number = 600.0
    docker_image: str | None = None
    os: Literal["linux", "windows"] = "linux"
    cpus: Number | None = None
    memory_mb: Count | None = None
    storage_mb: Count | None = None
    # Legacy spellings of memory_mb and storage_mb ("2G"); folded into them below.
    memory: str | None = None
    storage: str | None = None
    gpus: Count | None = None
    gpu_types: list[str] | None = None
    tpu: TpuSpec | None = None
    # Harbor's default is public. Whether the author set it is kept apart (see
    # network_mode_set), because examhall maps an unset mode and refuses an explicit one.
    network_mode: NetworkMode = "public"
    allowed_hosts: list[str] | None = None
    allow_internet: bool | None = None
    mcp_servers: list[MCPServerConfig] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    skills_dir: str | None = None
    healthcheck: HealthcheckConfig | None = None
    workdir: str | None = None

    @field_validator("os", mode="before")
    @classmethod
    def lower_os(cls, value: Any) -> Any:
        # Harbor accepts "Linux" and "WINDOWS".
        return value.lower() if isinstance(value, str) else value

    @field_validator("cpus")
    @classmethod
    def finite_cpus(cls, value: float | None) -> float | None:
        if value is not None and not math.isfinite(value):
            raise ValueError(f"cpus must be a finite number, not {value}")
        return value

    @field_validator("memory", "storage")
    @classmethod
    def size(cls, value: str | None) -> str | None:
        if value is not None:
            _parse_size_to_mb(value)
        return value

    @model_validator(mode="after")
    def fold_legacy_sizes(self) -> EnvironmentConfig:
        for legacy, field in (("memory", "memory_mb"), ("storage", "storage_mb")):
            text = getattr(self, legacy)
            if text is None:
                continue
            megabytes = _parse_size_to_mb(text)
            current = getattr(self, field)
            if current is not None and current != megabytes:
                raise ValueError(
                    f"{legacy} = {text!r} ({megabytes} MB) and {field} = {current} disagree; "
                    f"keep only {field}"
                )
            setattr(self, field, megabytes)
        return self

    @property
    def network_mode_set(self) -> bool:
        return "network_mode" in self.model_fields_set

    @property
    def effective_network_mode(self) -> NetworkMode:
        """Harbor's resolution: an explicit network_mode wins; else allow_internet decides;
        else the default, public."""
        if self.network_mode_set or self.allowed_hosts is not None:
            return self.network_mode
        if self.allow_internet is not None:
            return "public" if self.allow_internet else "no-network"
        return self.network_mode


class VerifierCollectConfig(_Section):
    command: str
    service: str = "main"
    timeout_sec: Number = 60.0
    user: User | None = None


class VerifierConfig(_PhaseNetwork):
    timeout_sec: Number = 600.0
    env: dict[str, str] = Field(default_factory=dict)
    user: User | None = None
    environment_mode: Literal["shared", "separate"] | None = None
    environment: EnvironmentConfig | None = None
    collect: list[VerifierCollectConfig] = Field(default_factory=list)


class SolutionConfig(_Section):
    env: dict[str, str] = Field(default_factory=dict)


class StepConfig(_Section):
    name: str
    agent: AgentConfig = Field(default_factory=AgentConfig)
    verifier: VerifierConfig = Field(default_factory=VerifierConfig)


class TaskConfig(_Section):
    schema_version: str = "1.4"
    task: PackageInfo | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    verifier: VerifierConfig = Field(default_factory=VerifierConfig)
    agent: AgentConfig = Field(default_factory=AgentConfig)
    environment: EnvironmentConfig = Field(default_factory=EnvironmentConfig)
    solution: SolutionConfig = Field(default_factory=SolutionConfig)
    source: str | None = None
    steps: list[StepConfig] | None = None

    @model_validator(mode="before")
    @classmethod
    def version_is_schema_version(cls, data: Any) -> Any:
        # Harbor's rename: task.toml files written before 1.1 say `version`.
        if isinstance(data, dict) and "version" in data:
            data = dict(data)
            data.setdefault("schema_version", data.pop("version"))
        return data


class TaskConfigError(ValueError):
    """task.toml is not TOML, or not a task.toml; `problems` has one line per field."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems


def field_name(loc: tuple[int | str, ...]) -> str:
    """A pydantic location as a task.toml author reads it: ('verifier', 'timeout_sec') is
    `[verifier].timeout_sec`, ('steps', 0, 'name') is `steps[0].name`, a top-level key is
    itself, a whole section (its own check failed) is `[environment]`."""
    if not loc:
        return "(the whole file)"

    def path(parts: tuple[int | str, ...]) -> str:
        text = ""
        for part in parts:
            text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else part)
        return text

    *head, last = loc
    if not head:
        if isinstance(last, str) and last in TaskConfig.model_fields and last not in _SCALAR_ROOT:
            return f"[{last}]"
        return str(last)
    table = path(tuple(head))
    if any(isinstance(part, int) for part in head):
        return f"{table}.{last}" if isinstance(last, str) else f"{table}[{last}]"
    return f"[{table}].{last}" if isinstance(last, str) else f"[{table}][{last}]"


_SCALAR_ROOT = {"schema_version", "source"}


def _syntax_problem(text: str, error: tomllib.TOMLDecodeError) -> str:
    """Bad TOML, with the key on the offending line when there is one."""
    reason = str(error)
    match = re.search(r"line (\d+)", reason)
    if match is None:
        return f"task.toml is not valid TOML: {reason}; fix the syntax"
    lines = text.splitlines()
    number = int(match.group(1))
    where = f"line {number}"
    if 0 < number <= len(lines):
        key = re.match(r"\s*([A-Za-z0-9_.\"'-]+)\s*=", lines[number - 1])
        section = ""
        for previous in reversed(lines[: number - 1]):
            header = re.match(r"\s*\[\[?\s*([^\]]+?)\s*\]\]?\s*(#.*)?$", previous)
            if header:
                section = f"[{header.group(1)}]"
                break
        if key:
            where = f"{section}.{key.group(1)}" if section else key.group(1)
            where = f"{where} (line {number})"
    return f"task.toml {where} is not valid TOML: {reason}; fix the syntax"


def parse_task_config(data: bytes) -> TaskConfig:
    """task.toml's bytes as a TaskConfig, or a TaskConfigError naming each bad field."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise TaskConfigError(
            [f"task.toml is not UTF-8 text (byte {error.start}); save it as UTF-8"]
        ) from None
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise TaskConfigError([_syntax_problem(text, error)]) from None
    except RecursionError:
        # tomllib recurses per level of nested arrays and inline tables (service/nesting.py).
        raise TaskConfigError([str(too_deep("task.toml"))]) from None
    # Dotted keys and table headers nest without recursing, so the parsed value is measured.
    if value_depth_exceeds(raw):
        raise TaskConfigError([str(too_deep("task.toml"))])
    try:
        return TaskConfig.model_validate(raw)
    except ValidationError as error:
        problems = []
        for item in error.errors(include_url=False):
            message = item["msg"].removeprefix("Value error, ")
            problems.append(f"task.toml {field_name(tuple(item['loc']))}: {message}")
        raise TaskConfigError(problems) from None
