"""The worker: enters the exam hall, runs one agent, judges it, reports. DESIGN.md steps 1-10.

Every step fails closed: a failure ends the trial with that step's name and message, and
nothing after it runs. Started as `python3 -P -m sandbox.worker` by the container entrypoint.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

from sandbox import bundle, credentials, limits, privilege, selfcheck, workspace
from sandbox.agent import AgentFailure, AgentState, run_agent
from sandbox.channel import Channel
from sandbox.conversation import ProviderError
from sandbox.models import resolve_model
from sandbox.prompt import PromptMismatch, build_system_prompt, prompt_sha256, verify_prompt
from sandbox.protocol import (
    BUNDLE_DIR,
    WORKSPACE_DIR,
    CaseInfo,
    CasesMessage,
    ErrorKind,
    Event,
    JudgeScore,
    LifecycleEvent,
    ListCasesRequest,
    ResultMessage,
    RunSpec,
    StepMessage,
    TrialResult,
)
from sandbox.relay import RelayModel
from sandbox.suite import AgentRun, Case, cases_of, find_case
from sandbox.supervisor import supervise
from sandbox.tools import DEFAULT_TOOLS, select_tools
from sandbox.tools.base import ToolContext
from sandbox.tools.bash import kill_strays

if TYPE_CHECKING:
    from sandbox.direct import DirectModel

T = TypeVar("T")
HOME = "/tmp/home"


class StepFailed(Exception):
    def __init__(self, step: str, message: str, kind: ErrorKind = "sandbox_error") -> None:
        super().__init__(message)
        self.step = step
        self.message = message
        self.kind = kind


def _fail(step: str, message: str) -> NoReturn:
    raise StepFailed(step, message)


class Worker:
    def __init__(self, channel: Channel) -> None:
        self.channel = channel
        self.timings: dict[str, float] = {}
        self.events: list[Event] = []
        self.direct: DirectModel | None = None

    def emit(self, event: Event) -> None:
        self.events.append(event)
        self.channel.event(event)

    def step(self, name: str, action: Callable[[], T]) -> T:
        """Run one step, timing it; any unexpected error fails the trial at this step."""
        started = time.monotonic()
        self.channel.send(StepMessage(step=name))
        try:
            return action()
        except StepFailed:
            raise
        except Exception as exc:
            raise StepFailed(name, f"{name} failed: {type(exc).__name__}: {exc}") from exc
        finally:
            self.timings[name] = round(time.monotonic() - started, 6)

    # ----- the steps, in order ---------------------------------------------------------

    def run(self) -> None:
        try:
            self.step("start_as_root", self.check_root)
            request = self.step("read_spec", self.channel.read_request)
        except StepFailed as failure:
            self.channel.send(ResultMessage(result=self.failed(failure)))
            self.channel.artifact("session.jsonl", b"")
            return
        if isinstance(request, ListCasesRequest):
            self.list_cases(request)
            return
        secrets = credentials.Credentials(request.spec.credentials)
        spec = dataclasses.replace(request.spec, credentials=None)
        del request
        _import_optional(spec)
        supervise(self.channel, lambda channel: self.run_sandboxed(channel, spec, secrets))

    def run_sandboxed(
        self, channel: Channel, spec: RunSpec, secrets: credentials.Credentials
    ) -> None:
        """Steps 3-10, in the forked child that becomes the sandbox user."""
        self.channel = channel
        try:
            case = self.step("load_bundle", lambda: self.load_case(spec))
            tool_env = self.step("scrub_env", self.scrub_env)
            self.step("seed_workspace", lambda: self.seed(spec, case))
            self.step("drop_privileges", lambda: self.drop(spec))
            self.step("self_check", lambda: self.self_check(tool_env))
            result = self.run_and_judge(spec, case, tool_env, secrets)
        except StepFailed as failure:
            result = self.failed(failure)
        self.channel.send(ResultMessage(result=result))

    def remote_model(
        self, name: str, spec: RunSpec, secrets: credentials.Credentials
    ) -> RelayModel | DirectModel:
        """A provider's model: through the control plane's relay, or called directly with the
        key this worker holds when the job chose direct credentials."""
        if spec.provider is None:
            return RelayModel(name, self.channel.send, self.channel.receive_line)
        from sandbox.direct import DirectModel
        from sandbox.providers.client import Budget

        model = DirectModel(
            name,
            spec.model.id,
            spec.provider,
            api_key=secrets.get("api_key"),
            budget=Budget.from_limits(spec.budget or {}),
            emit=self.emit,
        )
        self.direct = model
        return model

    def failed(self, failure: StepFailed) -> TrialResult:
        return TrialResult(
            outcome="error",
            error_kind=failure.kind,
            error_message=failure.message,
            failed_step=failure.step,
            timings=self.timings,
        )

    def check_root(self) -> None:
        if os.getuid() != 0 or os.geteuid() != 0:
            _fail("start_as_root", "The worker must start as root to enter the sandbox.")

    def import_suite(self, name: str, source: str) -> list[Case]:
        path = bundle.write_bundle(Path(BUNDLE_DIR), name, source)
        try:
            module = bundle.import_bundle(path)
            return cases_of(module)
        except Exception as exc:
            _fail("load_bundle", f"Suite {name} failed to load: {type(exc).__name__}: {exc}")

    def list_cases(self, request: ListCasesRequest) -> None:
        try:
            cases = self.step(
                "load_bundle", lambda: self.import_suite(request.suite.name, request.suite.source)
            )
        except StepFailed as failure:
            self.channel.send(CasesMessage(cases=[], error=failure.message))
            return
        infos = [
            CaseInfo(id=c.id, metadata=_jsonable(dict(c.metadata)), scripts=sorted(c.scripts))
            for c in cases
        ]
        self.channel.send(CasesMessage(cases=infos))

    def load_case(self, spec: RunSpec) -> Case:
        cases = self.import_suite(spec.suite.name, spec.suite.source)
        try:
            return find_case(cases, spec.case_id)
        except LookupError as exc:
            _fail("load_bundle", str(exc))

    def scrub_env(self) -> dict[str, str]:
        credentials.scrub_environment(os.environ)
        return credentials.tool_environment(HOME)

    def seed(self, spec: RunSpec, case: Case) -> None:
        try:
            workspace.seed_workspace(
                Path(WORKSPACE_DIR), case.files, spec.sandbox_uid, spec.sandbox_gid
            )
        except workspace.FixtureError as exc:
            _fail("seed_workspace", str(exc))
        workspace.prepare_directory(Path(HOME), spec.sandbox_uid, spec.sandbox_gid)

    def drop(self, spec: RunSpec) -> None:
        try:
            privilege.drop_privileges(spec.sandbox_uid, spec.sandbox_gid)
            privilege.verify_dropped(spec.sandbox_uid, spec.sandbox_gid)
        except (OSError, privilege.PrivilegeError) as exc:
            _fail("drop_privileges", f"Failed to enter the unprivileged sandbox: {exc}")

    def self_check(self, tool_env: dict[str, str]) -> None:
        paths = bundle.protected_paths(Path(BUNDLE_DIR))
        for pid in (os.getpid(), os.getppid(), 1):  # this worker, its supervisor, init
            paths += [f"/proc/{pid}/environ", f"/proc/{pid}/mem"]
        try:
            selfcheck.verify_unreadable(paths, tool_env)
        except selfcheck.ReadableError as exc:
            _fail("self_check", str(exc))

    def run_and_judge(
        self,
        spec: RunSpec,
        case: Case,
        tool_env: dict[str, str],
        secrets: credentials.Credentials,
    ) -> TrialResult:
        state = AgentState()
        prompt_hash: str | None = None
        limits_hit: list[str] = []
        watch = limits.snapshot()

        def note_limits() -> None:
            nonlocal watch
            for hit in limits.hits_since(watch):
                if hit not in limits_hit:
                    limits_hit.append(hit)
                    self.emit(LifecycleEvent(step="limit", detail=f"the agent hit the {hit} limit"))
            watch = limits.snapshot()

        started = time.monotonic()
        self.channel.send(StepMessage(step="run_agent"))
        try:
            model, how = resolve_model(
                spec.model,
                case,
                seed=spec.seed,
                round_=spec.round,
                variant=spec.variant,
                remote=lambda name: self.remote_model(name, spec, secrets),
            )
            self.emit(LifecycleEvent(step="model", detail=f"{spec.model}: {how}"))
            names = spec.tools if spec.tools is not None else (case.tools or DEFAULT_TOOLS)
            try:
                tools = select_tools(list(names))
            except ValueError as exc:
                raise StepFailed("run_agent", str(exc)) from None
            system = build_system_prompt([t.name for t in tools], docs=spec.docs, rules=spec.rules)
            try:
                verify_prompt(system, variant=spec.variant, has_docs=spec.docs is not None)
            except PromptMismatch as exc:
                raise StepFailed("run_agent", str(exc)) from None
            prompt_hash = prompt_sha256(system)
            self.emit(LifecycleEvent(step="system_prompt", detail=f"sha256 {prompt_hash}"))
            ctx = ToolContext(
                workspace=Path(WORKSPACE_DIR),
                timeout_s=spec.limits.tool_timeout_s,
                output_limit=spec.limits.tool_output_bytes,
                env=tool_env,
            )
            if spec.command:
                from sandbox.external import run_external

                run_external(
                    spec.command,
                    model,
                    prompts=case.prompts,
                    env=tool_env,
                    cwd=WORKSPACE_DIR,
                    timeout_s=spec.limits.agent_timeout_s,
                    emit=self.emit,
                    state=state,
                    artifact=self.channel.artifact,
                )
            else:
                run_agent(
                    model,
                    system=system,
                    prompts=case.prompts,
                    tools=tools,
                    ctx=ctx,
                    max_turns=spec.limits.max_turns,
                    emit=self.emit,
                    state=state,
                    after_tool=note_limits,
                )
            failure: tuple[ErrorKind, str] | None = None
        except ProviderError as exc:
            failure = (exc.kind, str(exc))
        except AgentFailure as exc:
            failure = (exc.kind, exc.message)
        except StepFailed as exc:
            failure = (exc.kind, exc.message)
        finally:
            # Nothing the agent started may keep running while the judges read the workspace.
            kill_strays()
            self.timings["run_agent"] = round(time.monotonic() - started, 6)

        def finish(**fields: Any) -> TrialResult:
            return TrialResult(
                usage=state.usage,
                model_requested=str(spec.model),
                model_returned=state.model_returned,
                tool_calls=state.tool_calls,
                final_text=state.final_text,
                system_prompt_sha256=prompt_hash,
                cost_usd=self.direct.spent.cost_usd if self.direct else None,
                limits_hit=limits_hit,
                timings=self.timings,
                **fields,
            )

        if failure is not None:
            kind, message = failure
            return finish(
                outcome="error", error_kind=kind, error_message=message, failed_step="run_agent"
            )
        self.channel.send(StepMessage(step="judge"))
        started = time.monotonic()
        run = AgentRun(state.final_text, Path(WORKSPACE_DIR), tuple(self.events))
        scores: list[JudgeScore] = []
        for item in case.judges:
            try:
                value, detail = item.score(run)
            except Exception as exc:
                self.timings["judge"] = round(time.monotonic() - started, 6)
                return finish(
                    outcome="error",
                    error_kind="judge_error",
                    error_message=f"Judge {item.name} failed: {type(exc).__name__}: {exc}",
                    failed_step="judge",
                    judges=scores,
                )
            scores.append(JudgeScore(name=item.name, score=value, detail=detail))
        self.timings["judge"] = round(time.monotonic() - started, 6)
        score = sum(s.score for s in scores) / len(scores)
        return finish(outcome="passed" if score >= 1.0 else "failed", score=score, judges=scores)


def _import_optional(spec: RunSpec) -> None:
    """Import the modules only some trials use, and only for those trials: urllib, http and
    email make up a third of the worker's start-up imports (about 40 ms of each trial).

    Here, as root, before the workspace is seeded, though the entrypoint's `-P` already
    keeps the working directory, /workspace, off sys.path: no harness module is first
    imported once the agent can write there, whatever the interpreter's flags.
    """
    if spec.provider is not None:
        import sandbox.direct
        import sandbox.providers.client
    if spec.command:
        import sandbox.external  # noqa: F401


def _jsonable(value: dict[str, object]) -> dict[str, object]:
    return json.loads(json.dumps(value, default=str))  # type: ignore[no-any-return]


def main() -> int:
    channel = Channel.take_stdio()
    try:
        Worker(channel).run()
    except Exception:
        # Past the point of reporting a result through the protocol: leave a trace for the
        # control plane's log and a non-zero exit, which it records as a sandbox error.
        traceback.print_exc()
        return 70
    finally:
        channel.close()
    return 0


if __name__ == "__main__":
    code = main()
    sys.stderr.flush()
    # Skip interpreter finalization: the supervisor's pump thread may be blocked reading
    # stdin, and closing stdin under it makes CPython wait a second and then abort.
    os._exit(code)
