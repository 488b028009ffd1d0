"""The worker: enters the exam hall, runs one agent, judges it, reports (docs/architecture/worker.md
tells its steps in order, from the fork to the report).

Every step fails closed: a failure ends the trial with that step's name and message, and
nothing after it runs. Started as `python3 -P -m sandbox.worker` by the container entrypoint.

The process that started as root forks at once and stays root as the supervisor
(sandbox/supervisor.py): it alone reads the run request, so it alone ever holds a
credential. The child scrubs its environment, drops to the sandbox user, and only then
imports the suite (from memory), seeds the workspace, checks what it cannot read, runs the
agent and the judges: suite code never runs with privilege or beside a key.

When the backend asks (EXAMHALL_SELF_CONFINE=1, where the engine could not apply them), the
first process sets no_new_privs and installs examhall's seccomp profile on itself before
anything else (sandbox/confine.py); every later process inherits both.
"""

from __future__ import annotations

import gc

from sandbox import lazy

# Before `dataclasses` and `linecache` import them (sandbox/lazy.py): no class of the start
# needs `inspect`, and the suite's lines go into linecache's cache without `tokenize`, which
# compiles its patterns as it loads. Where they are loaded already (a test, the control
# plane) this does nothing.
lazy.defer("inspect")
lazy.defer("tokenize")
if __name__ == "__main__":
    # Nothing the start's imports create is garbage, so the collector's passes over their
    # objects are wasted; `main` turns it on again once they are done.
    gc.disable()

import dataclasses

from sandbox import dataclass_code

# Before any module of the start makes its dataclasses: their methods' code was compiled
# when the image was built (sandbox/dataclass_code.py). Without the image's store (a test,
# the control plane) this does nothing.
dataclass_code.install(dataclasses)

import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import sandbox
from sandbox import (
    bundle,
    caps,
    confine,
    credentials,
    limits,
    netcut,
    privilege,
    selfcheck,
    workspace,
)
from sandbox.agent import AgentFailure, AgentState, run_agent
from sandbox.channel import Channel
from sandbox.conversation import ProviderError
from sandbox.model_choice import Model, resolve_model
from sandbox.prompt import PromptMismatch, build_system_prompt, prompt_sha256, verify_prompt
from sandbox.protocol import (
    SANDBOX_GID,
    SANDBOX_UID,
    CaseInfo,
    CasesMessage,
    ErrorKind,
    Event,
    JudgeScore,
    LifecycleEvent,
    Limits,
    ListCasesRequest,
    ResultMessage,
    RunSpec,
    StepMessage,
    TrialResult,
)
from sandbox.suite import AgentRun, Case, JudgeModelError, cases_of, combine, find_case
from sandbox.supervisor import supervise
from sandbox.tools import DEFAULT_TOOLS, select_tools
from sandbox.tools.base import ToolContext
from sandbox.tools.bash import kill_strays

T = TypeVar("T")
HOME = workspace.SANDBOX_HOME


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
        self.transcript = caps.TranscriptCap(Limits.max_events, Limits.max_event_bytes)

    def emit(self, event: Event, *, capped: bool = True) -> None:
        """Send one transcript event; CapExceeded (not sent) once the transcript is full.
        `capped=False` is for the worker's own last word on a trial that hit a cap."""
        self.channel.event(event, self.transcript.admit if capped else None)
        self.events.append(event)

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
            # First, in the one process that exists: before anything is read from the
            # channel, before the fork, and so before any suite or agent code.
            if netcut.requested(os.environ):
                self.step("cut_network", self.cut_network)
            if confine.requested(os.environ):
                self.step("self_confine", self.confine_self)
            self.step("start_as_root", self.check_root)
        except StepFailed as failure:
            self.channel.send(ResultMessage(result=self.failed(failure)))
            self.channel.artifact("session.jsonl", b"")
            return
        supervise(self.channel, self.run_sandboxed)

    def run_sandboxed(self, channel: Channel) -> None:
        """Steps 3-10, in the forked child that becomes the sandbox user; its request
        comes from the supervisor, without credentials."""
        self.channel = channel
        try:
            request = channel.read_request()
        except EOFError:
            return  # the supervisor had no request to hand over, and reported why
        if isinstance(request, ListCasesRequest):
            self.list_cases(request)
            return
        spec = request.spec
        self.transcript = caps.TranscriptCap(spec.limits.max_events, spec.limits.max_event_bytes)
        # What only some trials use is imported for those alone, and before the agent runs.
        if spec.task is not None:
            import sandbox.task_case
        if spec.command:
            import sandbox.external  # noqa: F401
        try:
            tool_env = self.step("scrub_env", self.scrub_env)
            if spec.task is not None:
                tool_env.update(spec.task.env)  # a task's own variables reach every tool
            self.step("drop_privileges", lambda: self.drop(spec.sandbox_uid, spec.sandbox_gid))
            case = self.step("load_bundle", lambda: self.load_case(spec))
            self.step("seed_workspace", lambda: self.seed(spec, case))
            self.step("self_check", self.self_check)
            result = self.run_and_judge(spec, case, tool_env)
        except StepFailed as failure:
            result = self.failed(failure)
        self.channel.send(ResultMessage(result=result))

    def failed(self, failure: StepFailed) -> TrialResult:
        return TrialResult(
            outcome="error",
            error_kind=failure.kind,
            error_message=failure.message,
            failed_step=failure.step,
            timings=self.timings,
        )

    def cut_network(self) -> None:
        try:
            netcut.cut_network()
            # Held for this alone: not even the root supervisor keeps it for the trial.
            privilege.drop_capability(netcut.CAP_NET_ADMIN)
        except (OSError, netcut.NetworkCutError, privilege.PrivilegeError) as exc:
            _fail(
                "cut_network",
                f"The worker could not leave the sandbox without a network "
                f"({netcut.CUT_NETWORK_ENV}=1), so the trial does not run: {exc}",
            )

    def confine_self(self) -> None:
        try:
            confine.confine_self()
        except confine.ConfinementError as exc:
            _fail(
                "self_confine",
                f"The worker could not confine itself ({confine.SELF_CONFINE_ENV}=1), so the "
                f"trial does not run: {exc}",
            )

    def check_root(self) -> None:
        if os.getuid() != 0 or os.geteuid() != 0:
            _fail("start_as_root", "The worker must start as root to enter the sandbox.")

    def import_suite(self, name: str, source: str) -> list[Case]:
        try:
            module = bundle.import_source(name, source)
            return cases_of(module)
        except Exception as exc:
            _fail("load_bundle", f"Suite {name} failed to load: {type(exc).__name__}: {exc}")

    def list_cases(self, request: ListCasesRequest) -> None:
        try:
            self.step("scrub_env", self.scrub_env)
            self.step("drop_privileges", lambda: self.drop(SANDBOX_UID, SANDBOX_GID))
            cases = self.step(
                "load_bundle", lambda: self.import_suite(request.suite.name, request.suite.source)
            )
        except StepFailed as failure:
            self.channel.send(CasesMessage(cases=[], error=failure.message))
            return
        infos = [
            CaseInfo(
                id=c.id,
                metadata=_jsonable(dict(c.metadata)),
                scripts=sorted(c.scripts),
                environment=_jsonable(c.environment.describe()) if c.environment else None,
            )
            for c in cases
        ]
        self.channel.send(CasesMessage(cases=infos))

    def load_case(self, spec: RunSpec) -> Case:
        if spec.task is not None:
            from sandbox.task_case import task_case

            return task_case(spec.task)
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
            root = workspace.root()
            workspace.seed_workspace(root, case.files, spec.sandbox_uid, spec.sandbox_gid)
            # A task environment's working directory, set aside when its image was built.
            workspace.copy_seed(Path(workspace.ENVIRONMENT_SEED), root)
        except workspace.FixtureError as exc:
            _fail("seed_workspace", str(exc))

    def drop(self, uid: int, gid: int) -> None:
        """Leave root for good, after giving the sandbox user its workspace and home."""
        try:
            for directory in (workspace.root(), Path(HOME)):
                workspace.prepare_directory(directory, uid, gid)
            # Inherited from the supervisor where the engine granted the means to set it.
            exempt = privilege.has_bounding_capability(privilege.CAP_SYS_RESOURCE)
            # A task's container holds the capabilities its verifier gets (sandbox/verifier.py):
            # none of them stays within reach of anything the agent execs.
            privilege.empty_bounding_set()
            privilege.drop_privileges(uid, gid)
            privilege.verify_dropped(uid, gid)
            if exempt and (adj := privilege.oom_score_adj()) != privilege.OOM_EXEMPT:
                raise privilege.PrivilegeError(f"the worker's oom_score_adj is {adj}.")
        except (OSError, privilege.PrivilegeError) as exc:
            _fail("drop_privileges", f"Failed to enter the unprivileged sandbox: {exc}")

    def self_check(self) -> None:
        # The case code is in this worker's memory only (and the request in the
        # supervisor's): no file holds it, so these are what an agent could read it from.
        paths = [
            f"/proc/{pid}/{name}"
            for pid in (os.getpid(), os.getppid(), 1)  # this worker, its supervisor, init
            for name in ("environ", "mem")
        ]
        try:
            selfcheck.verify_unreadable(paths)
        except selfcheck.ReadableError as exc:
            _fail("self_check", str(exc))

    def run_and_judge(self, spec: RunSpec, case: Case, tool_env: dict[str, str]) -> TrialResult:
        state = AgentState()
        limits_hit: list[str] = []
        watch = limits.snapshot()

        def hit(limit: str, detail: str) -> None:
            if limit not in limits_hit:
                limits_hit.append(limit)
                self.emit(LifecycleEvent(step="limit", detail=detail), capped=False)

        def note_limits() -> None:
            nonlocal watch
            for name in limits.hits_since(watch):
                hit(name, f"the agent hit the {name} limit")
            watch = limits.snapshot()

        started = time.monotonic()
        self.channel.send(StepMessage(step="run_agent"))
        capped: caps.CapExceeded | None = None
        try:
            failure = self.run_agent(spec, case, tool_env, state, note_limits)
        except caps.CapExceeded as exc:
            failure, capped = _Ran(None), exc
        finally:
            # Nothing the agent started may keep running while the judges read the workspace.
            kill_strays()
            self.timings["run_agent"] = round(time.monotonic() - started, 6)
        # An external agent's model call that filled the transcript raised inside the
        # endpoint, where only the agent's HTTP client saw it: the cap decides either way.
        capped = capped or self.transcript.tripped
        if capped is not None:
            failure = dataclasses.replace(failure, error=("limit_exceeded", capped.message))
            hit(capped.cap, capped.message)

        def finish(**fields: Any) -> TrialResult:
            return TrialResult(
                usage=state.usage,
                model_requested=str(spec.model),
                model_returned=state.model_returned,
                tool_calls=state.tool_calls,
                final_text=state.final_text,
                system_prompt_sha256=failure.prompt_hash,
                limits_hit=limits_hit,
                timings=self.timings,
                **fields,
            )

        if failure.error is not None:
            kind, message = failure.error
            return finish(
                outcome="error", error_kind=kind, error_message=message, failed_step="run_agent"
            )
        if spec.task is not None:
            # Scored by the root supervisor's verifier once this process is gone; until
            # then, and should that never happen, a failure.
            return finish(outcome="failed", score=0.0)
        self.channel.send(StepMessage(step="judge"))
        started = time.monotonic()
        try:
            scores = self.judge(spec, case, state)
        except _JudgeFailed as failed:
            if failed.cap is not None:
                hit(failed.cap, failed.message)
            return finish(
                outcome="error",
                error_kind=failed.kind,
                error_message=failed.message,
                failed_step="judge",
                judges=failed.scores,
            )
        finally:
            self.timings["judge"] = round(time.monotonic() - started, 6)
        score, passed = combine([(s.name, s.score) for s in scores], case.scoring)
        return finish(outcome="passed" if passed else "failed", score=score, judges=scores)

    def run_agent(
        self,
        spec: RunSpec,
        case: Case,
        tool_env: dict[str, str],
        state: AgentState,
        after_tool: Callable[[], None],
    ) -> _Ran:
        """Step 8; what went wrong, if anything, as the trial's error kind and message."""
        prompt_hash: str | None = None
        try:
            if spec.task is not None and spec.task.agent is not None:
                from sandbox.task_case import run_builtin

                # A built-in agent checks the task; it has no model and no prompt.
                run_builtin(
                    spec.task.agent,
                    env={**tool_env, **spec.task.solution_env},
                    cwd=workspace.task_workdir(spec.task.workdir),
                    timeout_s=spec.limits.agent_timeout_s,
                    emit=self.emit,
                    artifact=self.channel.artifact,
                )
                return _Ran(None)
            model, how = resolve_model(
                spec.model,
                case,
                seed=spec.seed,
                round_=spec.round,
                variant=spec.variant,
                # Relayed or direct alike: the supervisor or the control plane holds the key.
                remote=self._relayed,
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
            root = workspace.root()
            self.emit(LifecycleEvent(step="system_prompt", detail=f"sha256 {prompt_hash}"))
            if spec.command:
                from sandbox.external import run_external

                run_external(
                    spec.command,
                    model,
                    prompts=case.prompts,
                    env=tool_env,
                    cwd=workspace.task_workdir(spec.task.workdir) if spec.task else str(root),
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
                    ctx=ToolContext(
                        workspace=root,
                        timeout_s=spec.limits.tool_timeout_s,
                        output_limit=spec.limits.tool_output_bytes,
                        env=tool_env,
                    ),
                    max_turns=spec.limits.max_turns,
                    max_tool_calls=spec.limits.max_tool_calls,
                    max_tool_calls_per_turn=spec.limits.max_tool_calls_per_turn,
                    emit=self.emit,
                    state=state,
                    after_tool=after_tool,
                )
        except ProviderError as exc:
            return _Ran((exc.kind, str(exc)), prompt_hash)
        except (AgentFailure, StepFailed) as exc:
            return _Ran((exc.kind, exc.message), prompt_hash)
        return _Ran(None, prompt_hash)

    def _relayed(self, name: str) -> Model:
        # Only trials whose model is relayed import the relay.
        from sandbox.relay import RelayModel

        return RelayModel(name, self.channel.send, self.channel.receive_line)

    def judge(self, spec: RunSpec, case: Case, state: AgentState) -> list[JudgeScore]:
        """Step 9: every judge's score, or _JudgeFailed.

        Whatever a judge trips over is what the agent left (a file too large to read, text
        that does not parse, a structure the judge did not expect): an agent could craft it
        to make the trial unscored, so a judge that raises fails the trial instead, and says
        so, as does one that returns no valid score. judge_error stays for faults of the
        judging itself, never for what the agent controls."""
        judge_model = None
        if spec.judge_model is not None:
            # Only jobs with a judge model import its client.
            from sandbox.graded import JudgeModelClient

            judge_model = JudgeModelClient(
                str(spec.judge_model), self.channel.send, self.channel.receive_line
            )
        run = AgentRun(
            state.final_text,
            workspace.root(),
            tuple(self.events),
            read_limit=spec.limits.judge_read_bytes,
            judge_model=judge_model,
        )
        scores: list[JudgeScore] = []
        for item in case.judges:
            try:
                value, detail = item.score(run)
            except JudgeModelError as exc:
                # Unscored, and retried: the control plane keeps it so only when its judge
                # gateway saw that failure itself (service/launch/judging.py).
                message = f"Judge {item.name}: {exc}"
                raise _JudgeFailed("judge_error", message, scores) from None
            except caps.CapExceeded as exc:
                scores.append(JudgeScore(name=item.name, score=0.0, detail=exc.message))
                raise _JudgeFailed("limit_exceeded", exc.message, scores, exc.cap) from None
            except BaseException as exc:  # SystemExit too: a judge cannot end the worker
                message = (
                    f"Judge {item.name} could not score the agent's work "
                    f"({type(exc).__name__}: {exc}); a judge that fails on what the agent "
                    "left fails the trial."
                )
                # Kept as a failed judge, so its own pass rate counts what it failed on.
                scores.append(JudgeScore(name=item.name, score=0.0, detail=message))
                raise _JudgeFailed("agent_error", message, scores) from None
            scores.append(
                JudgeScore(
                    name=item.name, score=value, detail=detail, rubric_sha256=item.rubric_sha256
                )
            )
        return scores


@dataclasses.dataclass(frozen=True)
class _Ran:
    """How step 8 ended: None, or the trial's error kind and message."""

    error: tuple[ErrorKind, str] | None
    prompt_hash: str | None = None


class _JudgeFailed(Exception):
    def __init__(
        self, kind: ErrorKind, message: str, scores: list[JudgeScore], cap: str | None = None
    ) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.scores = scores
        self.cap = cap


def _jsonable(value: dict[str, object]) -> dict[str, object]:
    return json.loads(json.dumps(value, default=str))  # type: ignore[no-any-return]


def main() -> int:
    # The start's objects live as long as the process: kept out of the collector's passes.
    gc.freeze()
    gc.enable()
    channel = Channel.take_stdio()
    worker = Worker(channel)
    worker.timings["imports"] = round(time.monotonic() - sandbox.STARTED, 6)
    try:
        worker.run()
    except Exception:
        # Past the point of reporting a result through the protocol: leave a trace on stderr
        # and a non-zero exit. The root supervisor reports the death (supervisor.py,
        # `death_result`): an agent_error during the agent's or judges' steps, else a
        # sandbox_error.
        import traceback

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
