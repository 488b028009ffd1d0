"""Wire types of the JSON-lines channel between the control plane and the worker.

One message per line in each direction over the container's stdin and stdout. The control
plane sends exactly one request (`run` or `list_cases`); the worker answers with a stream
of `step`, `event` and `artifact` messages and ends with one `result` (or `cases`).

These are plain dataclasses so the worker needs only the standard library; the control
plane validates everything that comes out of the container with pydantic over these same
types (the container is the untrusted side).
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field
from typing import Any, Literal

PROTOCOL_VERSION = 1

ErrorKind = Literal[
    "agent_error",
    "provider_error",
    "timeout",
    "limit_exceeded",
    "judge_error",
    "sandbox_error",
    "infra_error",
    # A task's verifier (tests/test.sh) left no reward after the agent's run: a failed run,
    # since the agent could have sabotaged the container to get there.
    "no_reward",
]
ERROR_KINDS: tuple[ErrorKind, ...] = (
    "agent_error",
    "provider_error",
    "timeout",
    "limit_exceeded",
    "judge_error",
    "sandbox_error",
    "infra_error",
    "no_reward",
)
Outcome = Literal["passed", "failed", "error"]

WORKSPACE_DIR = "/workspace"
SANDBOX_UID = 65532
SANDBOX_GID = 65532


# ----- control plane -> worker -------------------------------------------------------


@dataclass(frozen=True)
class SuiteBundle:
    """A suite's source, shipped to the container; the control plane never imports it."""

    name: str
    source: str


@dataclass(frozen=True)
class TaskSpec:
    """A task that brings its own environment and verifier (Harbor's format).

    The prompt is the task's instruction. The verifier's files (tests/) and, for a trial whose
    agent runs the reference solution (`runs_solution`), the whole solution/ directory travel
    base64-encoded, by path relative to their directory. Only the root supervisor ever holds
    the verifier's, and it writes them into the container after the agent's processes are
    gone; the solution it writes into /solution before the agent starts."""

    name: str
    instruction: str
    tests: dict[str, str] = field(default_factory=dict)
    solution: dict[str, str] | None = None
    verifier_timeout_s: float = 600.0
    verifier_env: dict[str, str] = field(default_factory=dict)
    # Harbor's [environment].env (every process of the task) and [solution].env (the oracle).
    env: dict[str, str] = field(default_factory=dict)
    solution_env: dict[str, str] = field(default_factory=dict)
    # The task's working directory as its tests know it (e.g. /app, where the trial's
    # workspace is mounted; /workspace is a link to it).
    workdir: str | None = None
    # Harbor's [agent].user: the user the agent runs as, created when the image lacks it
    # (sandbox/task_user.py); None: examhall's sandbox user.
    agent_user: str | None = None
    # The verifier of examhall's first releases, which a task may ask for: no capability and
    # nothing of the working directory on sys.path (sandbox/verifier.py).
    strict_verifier: bool = False
    # A built-in agent instead of a model's: "oracle" runs /solution/solve.sh, "nop" nothing.
    agent: str | None = None
    # The job's egress policy gives this task a way out: the supervisor starts its proxy
    # fronts (sandbox/egress.py), whose every connection the control plane decides.
    egress: bool = False


# Models that replay a case's "solution" script: for a task, its reference solution.
SCRIPTED_PROVIDERS = frozenset({"faux", "simulated"})


def runs_solution(agent: str | None, provider: str, *, installed: bool = False) -> bool:
    """Whether a task trial's agent runs the reference solution, and so gets solution/: the
    oracle, or examhall's own loop under a scripted model (which replays `bash
    /solution/solve.sh` as its own call). A real model's trial never does, nor an installed
    agent's (a pip or catalogue agent, `installed`) under any model: it could read the
    solution itself, and the reference solution would be its answer key."""
    if agent is not None:
        return agent == "oracle"
    return not installed and provider in SCRIPTED_PROVIDERS


@dataclass(frozen=True)
class ModelRef:
    """`provider/id`, e.g. `faux/solution` or `simulated/coin?p=0.85`."""

    provider: str
    id: str

    @classmethod
    def parse(cls, text: str) -> ModelRef:
        provider, sep, model_id = text.partition("/")
        if not sep or not provider or not model_id:
            raise ValueError(
                f"Model {text!r} is not PROVIDER/MODEL; give both, e.g. faux/solution "
                "or simulated/coin?p=0.85."
            )
        return cls(provider=provider, id=model_id)

    def __str__(self) -> str:
        return f"{self.provider}/{self.id}"


@dataclass(frozen=True)
class Limits:
    """A trial's limits: turns, tool time and output, and what judges may read."""

    max_turns: int = 50
    tool_timeout_s: float = 60.0
    tool_output_bytes: int = 64 * 1024
    # An external agent's whole run; the control plane's trial deadline still applies.
    agent_timeout_s: float = 3600.0
    # Caps on what the agent controls (sandbox/caps.py): each one hit is limit_exceeded.
    max_tool_calls: int = 1000
    max_tool_calls_per_turn: int = 64
    max_events: int = 20_000
    max_event_bytes: int = 32 * 1024 * 1024
    # The most a judge reads of one workspace file; a larger file fails the trial.
    judge_read_bytes: int = 16 * 1024 * 1024


@dataclass(frozen=True)
class RunSpec:
    """Everything one trial runs on: the suite, the case, the model and its limits."""

    trial_id: str
    suite: SuiteBundle
    case_id: str
    model: ModelRef
    variant: str = "default"
    round: int = 1
    seed: int = 0
    # None means the case's own tool list (or the default file tools).
    tools: tuple[str, ...] | None = None
    limits: Limits = field(default_factory=Limits)
    # Direct mode only: provider keys, held in the worker's memory and never in env or on disk.
    credentials: dict[str, str] | None = None
    # The docs bundle for this variant (file name -> markdown), or None for no <docs> section.
    docs: dict[str, str] | None = None
    # Replaces the default <rules> text: the harness's system-prompt transform.
    rules: str | None = None
    # Direct mode: the provider's wire settings (kind, base_url, headers, max_tokens, price);
    # its key travels in `credentials["api_key"]`. None means faux, simulated or the relay.
    provider: dict[str, Any] | None = None
    # Per-trial budget for direct mode (the gateway keeps it in relay mode).
    budget: dict[str, float] | None = None
    # An external agent's argv, run instead of the built-in loop ("{task}" is the prompt).
    command: tuple[str, ...] | None = None
    sandbox_uid: int = SANDBOX_UID
    sandbox_gid: int = SANDBOX_GID
    # A task with its own environment and verifier, instead of a judged case of `suite`.
    task: TaskSpec | None = None
    # The job's judge model for model-graded judges, reached through the control plane only.
    judge_model: ModelRef | None = None


@dataclass(frozen=True)
class RunRequest:
    """The control plane's request to run one trial."""

    spec: RunSpec
    type: Literal["run"] = "run"
    protocol: int = PROTOCOL_VERSION


@dataclass(frozen=True)
class ListCasesRequest:
    """The control plane's request for a suite's cases."""

    suite: SuiteBundle
    type: Literal["list_cases"] = "list_cases"
    protocol: int = PROTOCOL_VERSION


# ----- events (the transcript) -------------------------------------------------------


@dataclass(frozen=True)
class ToolCall:
    """One tool call the model asked for."""

    id: str
    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class Usage:
    """What a model call or a trial used: tokens, requests, prompt-cache reads and writes."""

    # All prompt tokens, cached or not (OpenAI's prompt_tokens), so input + output is the
    # whole traffic; the cache counts below are the parts of input_tokens the provider
    # read from or wrote to its prompt cache, priced at their own rates.
    input_tokens: int = 0
    output_tokens: int = 0
    requests: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.requests + other.requests,
            self.cache_read_tokens + other.cache_read_tokens,
            self.cache_write_tokens + other.cache_write_tokens,
        )


@dataclass(frozen=True)
class MessageEvent:
    """A message of the transcript, the user's or the model's."""

    role: Literal["user", "assistant"]
    content: str
    tool_calls: list[ToolCall] = field(default_factory=list)
    stop_reason: str | None = None
    model: str | None = None
    usage: Usage | None = None
    type: Literal["message"] = "message"


@dataclass(frozen=True)
class ToolCallEvent:
    """A tool call of the transcript, as the model asked for it."""

    id: str
    name: str
    arguments: dict[str, Any]
    type: Literal["tool_call"] = "tool_call"


@dataclass(frozen=True)
class ToolResultEvent:
    """A tool's result in the transcript, or its error."""

    tool_call_id: str
    name: str
    content: str
    error: str | None = None
    type: Literal["tool_result"] = "tool_result"


@dataclass(frozen=True)
class LifecycleEvent:
    """A step of the worker in the transcript (started, judged, ...)."""

    step: str
    detail: str = ""
    type: Literal["lifecycle"] = "lifecycle"


Event = MessageEvent | ToolCallEvent | ToolResultEvent | LifecycleEvent


# ----- worker -> control plane -------------------------------------------------------


@dataclass(frozen=True)
class JudgeScore:
    """One judge's score of the trial, with its detail."""

    name: str
    score: float
    detail: str = ""
    # A model-graded judge's rubric (sha256 of its text).
    rubric_sha256: str | None = None


@dataclass(frozen=True)
class TrialResult:
    """How the trial ended: its outcome, scores, usage and timings."""

    outcome: Outcome
    score: float | None = None
    error_kind: ErrorKind | None = None
    error_message: str | None = None
    # The worker step that failed, for sandbox errors ("drop_privileges", ...).
    failed_step: str | None = None
    judges: list[JudgeScore] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    model_requested: str | None = None
    model_returned: str | None = None
    tool_calls: int = 0
    final_text: str | None = None
    system_prompt_sha256: str | None = None
    # Direct mode only: what the worker's own provider calls cost (None when unpriced).
    cost_usd: float | None = None
    # Container limits the agent's processes ran into: "pids", "memory", "disk:/workspace"...
    limits_hit: list[str] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class CaseInfo:
    """A case of a suite as the control plane lists it."""

    id: str
    metadata: dict[str, Any] = field(default_factory=dict)
    # Names of the case's faux scripts, so a submission can check `faux/NAME` up front.
    scripts: list[str] = field(default_factory=list)
    # The case's environment (sandbox.suite.Environment.describe()), or None.
    environment: dict[str, Any] | None = None


@dataclass(frozen=True)
class StepMessage:
    """The worker reached a step of its start (the control plane times them)."""

    step: str
    type: Literal["step"] = "step"


@dataclass(frozen=True)
class EventMessage:
    """One event of the transcript, numbered."""

    seq: int
    event: Event
    type: Literal["event"] = "event"


@dataclass(frozen=True)
class ArtifactMessage:
    """A file the trial left, base64 with its digest."""

    name: str
    content_b64: str
    sha256: str
    size: int
    type: Literal["artifact"] = "artifact"


@dataclass(frozen=True)
class ResultMessage:
    """The trial's result: the worker's last message."""

    result: TrialResult
    type: Literal["result"] = "result"


@dataclass(frozen=True)
class CasesMessage:
    """A suite's cases, or why they could not be listed."""

    cases: list[CaseInfo]
    error: str | None = None
    type: Literal["cases"] = "cases"


WorkerMessage = StepMessage | EventMessage | ArtifactMessage | ResultMessage | CasesMessage

# Longest line either side accepts; a larger line is a protocol fault, not a memory hazard.
MAX_LINE_BYTES = 64 * 1024 * 1024
# The most content one artifact message carries: base64 takes 4 bytes for every 3, and the
# rest of the message (name, digest, size, keys) fits well within the 64 KiB kept aside, so
# an artifact's line never passes MAX_LINE_BYTES.
MAX_ARTIFACT_BYTES = (MAX_LINE_BYTES - 64 * 1024) // 4 * 3


def encode(message: object) -> bytes:
    """One JSON line for a protocol dataclass; never raises for any value it holds.

    Much of what crosses the channel is the agent's: a file name that is not UTF-8 (a str
    with surrogate escapes), a model message with a lone surrogate, a NaN in tool arguments,
    an object a tool returned. Were any of them able to make encoding raise, the worker would
    die and an agent could turn its failure into an unscored trial. So the fast path is tried
    first and anything it refuses is made representable, visibly (surrogates become `\\udcff`
    text, non-finite numbers null, unknown objects their repr), never dropped silently.
    """
    try:
        payload = dataclasses.asdict(message)  # type: ignore[call-overload]
        text = json.dumps(payload, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
        return text.encode() + b"\n"
    except (ValueError, TypeError, RecursionError):  # UnicodeEncodeError is a ValueError
        text = json.dumps(jsonable(message), separators=(",", ":"), ensure_ascii=False)
        return text.encode() + b"\n"


def clean_text(value: str) -> str:
    """`value` as text that UTF-8 can encode: lone surrogates become visible escapes."""
    try:
        value.encode()
        return value
    except UnicodeEncodeError:
        return value.encode("utf-8", "backslashreplace").decode()


def jsonable(value: Any, depth: int = 0) -> Any:
    """Any value as plain JSON data with encodable text: total by construction."""
    if depth > 64:
        return "[nested too deeply]"
    if value is None or isinstance(value, bool | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).decode("utf-8", "backslashreplace")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            f.name: jsonable(getattr(value, f.name), depth + 1) for f in dataclasses.fields(value)
        }
    if isinstance(value, dict):
        return {clean_text(str(k)): jsonable(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [jsonable(item, depth + 1) for item in value]
    try:
        return clean_text(repr(value))
    except Exception:  # a hostile __repr__
        return f"<unrepresentable {type(value).__name__}>"


# ----- decoding on the worker side (trusted input from the control plane) -------------


class ProtocolError(ValueError):
    """A channel message that does not match the protocol."""


def _require(data: dict[str, Any], key: str, kind: type | tuple[type, ...]) -> Any:
    if key not in data:
        raise ProtocolError(f"Run request is missing {key!r}.")
    value = data[key]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ProtocolError(f"Run request field {key!r} has the wrong type.")
    return value


def _suite(data: Any) -> SuiteBundle:
    if not isinstance(data, dict):
        raise ProtocolError("Run request field 'suite' must be an object.")
    return SuiteBundle(name=_require(data, "name", str), source=_require(data, "source", str))


def _string_map(spec: dict[str, Any], key: str) -> dict[str, str] | None:
    value = spec.get(key)
    if value is None:
        return None
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise ProtocolError(f"Run request field {key!r} must map names to strings.")
    return value


def _optional_string(data: dict[str, Any], key: str) -> str | None:
    value = data.get(key)
    if value is not None and not isinstance(value, str):
        raise ProtocolError(f"Run request field 'task.{key}' must be a string.")
    return value


def _flag(data: dict[str, Any], key: str) -> bool:
    value = data.get(key, False)
    if not isinstance(value, bool):
        raise ProtocolError(f"Run request field 'task.{key}' must be true or false.")
    return value


def _task(data: Any) -> TaskSpec | None:
    if data is None:
        return None
    if not isinstance(data, dict):
        raise ProtocolError("Run request field 'task' must be an object.")
    return TaskSpec(
        name=_require(data, "name", str),
        instruction=_require(data, "instruction", str),
        tests=_string_map(data, "tests") or {},
        solution=_string_map(data, "solution"),
        verifier_timeout_s=float(_require(data, "verifier_timeout_s", (int, float))),
        verifier_env=_string_map(data, "verifier_env") or {},
        env=_string_map(data, "env") or {},
        solution_env=_string_map(data, "solution_env") or {},
        workdir=_optional_string(data, "workdir"),
        agent_user=_optional_string(data, "agent_user"),
        strict_verifier=_flag(data, "strict_verifier"),
        agent=_optional_string(data, "agent"),
        egress=_flag(data, "egress"),
    )


def _limits(data: Any) -> Limits:
    if not isinstance(data, dict):
        raise ProtocolError("Run request field 'limits' must be an object.")
    defaults = Limits()
    # Each limit keeps its default's type: an int cap stays an int.
    return Limits(
        **{
            f.name: type(getattr(defaults, f.name))(data[f.name])
            for f in dataclasses.fields(Limits)
            if f.name in data
        }
    )


def decode_request(line: bytes) -> RunRequest | ListCasesRequest:
    try:
        data = json.loads(line)
    except ValueError as exc:
        raise ProtocolError(f"Run request is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ProtocolError("Run request must be a JSON object.")
    if data.get("protocol") != PROTOCOL_VERSION:
        raise ProtocolError(
            f"Protocol version {data.get('protocol')!r} is not {PROTOCOL_VERSION}; "
            "rebuild the sandbox image with `examhall image build`."
        )
    kind = data.get("type")
    if kind == "list_cases":
        return ListCasesRequest(suite=_suite(data.get("suite")))
    if kind != "run":
        raise ProtocolError(f"Unknown request type {kind!r}.")
    spec = _require(data, "spec", dict)
    model = _require(spec, "model", dict)
    limits = spec.get("limits") or {}
    tools = spec.get("tools")
    credentials = _string_map(spec, "credentials")
    docs = _string_map(spec, "docs")
    rules = spec.get("rules")
    if rules is not None and not isinstance(rules, str):
        raise ProtocolError("Run request field 'rules' must be a string.")
    provider = spec.get("provider")
    if provider is not None and not isinstance(provider, dict):
        raise ProtocolError("Run request field 'provider' must be an object.")
    judge_model = spec.get("judge_model")
    if judge_model is not None and not isinstance(judge_model, dict):
        raise ProtocolError("Run request field 'judge_model' must be an object.")
    budget = spec.get("budget")
    if budget is not None and not isinstance(budget, dict):
        raise ProtocolError("Run request field 'budget' must be an object.")
    return RunRequest(
        spec=RunSpec(
            trial_id=_require(spec, "trial_id", str),
            suite=_suite(spec.get("suite")),
            case_id=_require(spec, "case_id", str),
            model=ModelRef(
                provider=_require(model, "provider", str), id=_require(model, "id", str)
            ),
            variant=spec.get("variant", "default"),
            round=int(spec.get("round", 1)),
            seed=int(spec.get("seed", 0)),
            tools=tuple(tools) if tools is not None else None,
            limits=_limits(limits),
            credentials=credentials,
            docs=docs,
            rules=rules,
            provider=provider,
            budget=budget,
            command=tuple(str(part) for part in spec["command"]) if spec.get("command") else None,
            sandbox_uid=int(spec.get("sandbox_uid", SANDBOX_UID)),
            sandbox_gid=int(spec.get("sandbox_gid", SANDBOX_GID)),
            task=_task(spec.get("task")),
            judge_model=ModelRef(
                provider=_require(judge_model, "provider", str), id=_require(judge_model, "id", str)
            )
            if judge_model is not None
            else None,
        )
    )
