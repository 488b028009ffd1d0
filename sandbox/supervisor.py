"""The root supervisor: it holds the credentials, outlives the sandboxed worker, and
reports for it, so that neither the agent nor the suite can erase a failure or reach a key.

The worker forks this supervisor's child before anything from the control plane is read:
the run request, and in direct mode the provider key in it, arrive only in the parent,
which is undumpable (no process in the container has CAP_SYS_PTRACE, so none can read its
memory, /proc files or descriptors). The child, which imports the suite, runs the agent and
the judges, gets the request without credentials; in direct mode its model calls come here
and the parent makes them with the key, as the control plane's gateway does in relay mode.

The agent's tools run as the same user as the child, so they can signal it: a `kill -9 -1`
would end the child before it reports, and a trial with no result looks like an
infrastructure fault. The parent stays root, which the agent's processes can neither signal,
trace nor read; when the child dies without a result, the parent reports that death itself,
and it builds the session artifact from the events it forwarded, so the transcript survives.
Both are exempt from the OOM killer, and the agent's processes are kept its first choice.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import signal
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, BinaryIO

from sandbox import limits, privilege, workspace
from sandbox.channel import Channel
from sandbox.protocol import (
    MAX_ARTIFACT_BYTES,
    MAX_LINE_BYTES,
    CasesMessage,
    ErrorKind,
    Event,
    LifecycleEvent,
    Limits,
    ListCasesRequest,
    ProtocolError,
    ResultMessage,
    RunRequest,
    RunSpec,
    StepMessage,
    TrialResult,
    encode,
    jsonable,
    runs_solution,
)

if TYPE_CHECKING:
    from sandbox.egress import EgressFront
    from sandbox.relay import ModelReplyMessage, ReplyErrorKind
    from sandbox.task_user import AgentUser

# Steps during which the agent's processes exist and may have ended the worker.
AGENT_STEPS = frozenset({"run_agent", "judge"})
# What the supervisor lets through past the worker's transcript caps: the worker's own
# notes of the cap it hit, and the supervisor's events.
CAP_SLACK_EVENTS = 16
CAP_SLACK_BYTES = 1024 * 1024
# Room under the session artifact's cap for its last line, the note that it was cut.
SESSION_NOTE_BYTES = 1024
# How often the agent's processes are put back first in line for the OOM killer.
OOM_PIN_INTERVAL_S = 0.2


def _how(status: int) -> str:
    if os.WIFSIGNALED(status):
        return f"was killed by {signal.Signals(os.WTERMSIG(status)).name}"
    return f"exited with code {os.waitstatus_to_exitcode(status)}"


def death_result(status: int, last_step: str | None) -> TrialResult:
    """What to report for a worker that ended without a result."""
    step = last_step or "start"
    how = _how(status)
    kind: ErrorKind
    if limits.snapshot().oom_kills:
        kind = "limit_exceeded"
        message = f"The worker {how} for memory during {step}: the trial passed its memory limit."
    elif step in AGENT_STEPS:
        # Signalled by the agent's processes, or ended by what the agent or a judge did to
        # it: either way within the agent's reach, so a failed run, never an unscored one.
        kind = "agent_error"
        message = (
            f"The worker {how} during {step} before reporting, which fails the trial "
            "(the agent's processes or what they left ended it)."
        )
    else:
        kind = "sandbox_error"
        message = f"The worker {how} during {step} before reporting a result."
    return TrialResult(outcome="error", error_kind=kind, error_message=message, failed_step=step)


class _ChildInput:
    """The child's stdin: written by the pump (relay replies) and by direct calls."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._lock = threading.Lock()

    def write(self, line: bytes) -> bool:
        """False once the child is gone."""
        with self._lock:
            try:
                data = memoryview(line)
                while data:
                    data = data[os.write(self._fd, data) :]
                return True
            except OSError:
                return False

    def close(self) -> None:
        with self._lock, contextlib.suppress(OSError):
            os.close(self._fd)


def _pump(source: BinaryIO, target: _ChildInput, front: EgressFront | None) -> None:
    """Copy the control plane's lines (model replies) to the child until either side ends;
    the egress front's lines go to the front."""
    try:
        for line in source:
            if front is not None and _for_front(line, front):
                continue
            if not target.write(line):
                return
    except OSError:
        pass  # the channel closed


def _for_front(line: bytes, front: EgressFront) -> bool:
    """Whether `line` was the egress front's (and went to it)."""
    from sandbox.egress import FOR_FRONT  # imported with the front already

    try:
        message = json.loads(line)
    except (ValueError, RecursionError):
        return False  # the child's to refuse
    if isinstance(message, dict) and message.get("type") in FOR_FRONT:
        with contextlib.suppress(Exception):  # a connection's fault, never the pump's
            front.on_message(message)
        return True
    return False


def _pin_agent_first(uid: int, worker: int, stop: threading.Event) -> None:
    """Keep every process of the sandbox user but the worker at the OOM killer's top score.

    A tool starts at 1000 by itself, but a process may lower its own score to the floor it
    inherited; written from here, with CAP_SYS_RESOURCE, 1000 is also its new floor."""
    while not stop.wait(OOM_PIN_INTERVAL_S):
        for name in os.listdir("/proc"):
            if not name.isdigit() or int(name) == worker:
                continue
            try:
                if os.stat(f"/proc/{name}").st_uid != uid:
                    continue
                if privilege.oom_score_adj(name) != privilege.OOM_FIRST:
                    privilege.set_oom_score_adj(privilege.OOM_FIRST, name)
            except (OSError, ValueError):
                continue  # gone meanwhile


class _Direct:
    """Direct credentials: the provider's key lives here, and only here."""

    def __init__(self, spec: RunSpec, emit: Callable[[Event], None]) -> None:
        from sandbox.direct import DirectModel
        from sandbox.providers.client import Budget

        assert spec.provider is not None
        self.model = DirectModel(
            f"{spec.model.provider}/{spec.model.id}",
            spec.model.id,
            spec.provider,
            api_key=(spec.credentials or {}).get("api_key"),
            budget=Budget.from_limits(spec.budget or {}),
            emit=emit,
        )

    def answer(self, message: dict[str, Any]) -> ModelReplyMessage:
        from sandbox.conversation import ProviderError
        from sandbox.relay import ModelReplyMessage, ReplyError, decode_call

        call_id = str(message.get("id", ""))
        try:
            call = decode_call(message)
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            return ModelReplyMessage(
                id=call_id, error=ReplyError("provider_error", f"Malformed model call: {exc}")
            )
        try:
            return ModelReplyMessage(id=call.id, turn=self.model.complete(call.request))
        except ProviderError as exc:
            kind: ReplyErrorKind = (
                "limit_exceeded" if exc.kind == "limit_exceeded" else "provider_error"
            )
            return ModelReplyMessage(id=call.id, error=ReplyError(kind, str(exc)))

    @property
    def cost_usd(self) -> float | None:
        return self.model.spent.cost_usd


class _Supervision:
    """What the parent knows of the child's run, from the lines it forwards."""

    def __init__(self, channel: Channel) -> None:
        self.channel = channel
        self.events: list[Any] = []
        self.last_step: str | None = None
        self.reported = False
        self.timings: dict[str, float] = {}
        self.direct: _Direct | None = None
        self.listing = False
        # A task trial: the child's result waits here for the verifier's verdict.
        self.verifying = False
        self.held: dict[str, Any] | None = None
        # Why the child was ended, when it was the supervisor that ended it.
        self.broken: str | None = None
        self.forwarded = 0
        self.event_bytes = 0
        self.limit(Limits())
        # The task's way out, when its job's egress policy gives it one.
        self.front: EgressFront | None = None

    def limit(self, limits: Limits) -> None:
        """Past the worker's own caps, with room for its notes of the cap it hit."""
        self.max_events = limits.max_events + CAP_SLACK_EVENTS
        self.max_event_bytes = limits.max_event_bytes + CAP_SLACK_BYTES

    def emit(self, event: Event) -> None:
        """An event of the parent's own (direct calls), in the transcript like the child's."""
        self.events.append(jsonable(event))
        self.channel.event(event)

    def result(self, result: TrialResult) -> None:
        self.reported = True
        self.channel.send(ResultMessage(result=result))

    def forward(self, message: dict[str, Any], line: bytes) -> None:
        kind = message.get("type")
        if kind == "step":
            self.last_step = message.get("step")
        elif kind == "event":
            self.forwarded += 1
            self.event_bytes += len(line)
            if self.forwarded > self.max_events or self.event_bytes > self.max_event_bytes:
                # The worker keeps the caps itself; only code in its process that writes to
                # the channel directly (a suite's) gets here.
                raise _Overflow("The worker sent more events than the trial's caps allow.")
            self.events.append(message.get("event"))
        elif isinstance(kind, str) and kind.startswith("egress_"):
            # Only the supervisor's own front opens connections (sandbox/egress.py); the
            # child's process holds suite code, which must not speak for it.
            raise _Overflow("The worker sent an egress message, which only the supervisor may.")
        elif kind == "cases":
            self.reported = True
        elif kind == "result":
            if self.reported:
                return
            self.reported = True
            if self.verifying:
                self.held = message
                return
            line = self._completed(message)
        self.channel.send_line(line)

    def _completed(self, message: dict[str, Any]) -> bytes:
        """The child's result with what only the parent knows: its own timings, and in
        direct mode what the provider calls cost."""
        result = message.get("result")
        if not isinstance(result, dict):
            return encode(ResultMessage(result=_lost("The worker sent a malformed result.")))
        timings = result.get("timings")
        result["timings"] = {**self.timings, **(timings if isinstance(timings, dict) else {})}
        if self.direct is not None:
            result["cost_usd"] = self.direct.cost_usd
        return json.dumps(message, separators=(",", ":")).encode() + b"\n"


def _lost(message: str, step: str = "start") -> TrialResult:
    return TrialResult(
        outcome="error", error_kind="sandbox_error", error_message=message, failed_step=step
    )


def _hand_over(channel: Channel, to_child: _ChildInput, run: _Supervision) -> RunSpec | None:
    """Read the control plane's request and pass it on without its credentials. Returns
    the trial's spec (None for a listing, or when there was no request: that is reported)."""
    run.channel.send(StepMessage(step="read_spec"))
    started = time.monotonic()
    try:
        request = channel.read_request()
    except (EOFError, ProtocolError, ValueError, TypeError) as exc:
        run.result(_lost(f"read_spec failed: {type(exc).__name__}: {exc}", "read_spec"))
        to_child.close()  # the child reads EOF and ends
        return None
    finally:
        run.timings["read_spec"] = round(time.monotonic() - started, 6)
    if isinstance(request, ListCasesRequest):
        run.listing = True
        to_child.write(encode(request))
        return None
    spec = request.spec
    del request
    run.limit(spec.limits)
    if spec.provider is not None:
        run.direct = _Direct(spec, run.emit)
    bare = dataclasses.replace(spec, credentials=None, provider=None, budget=None)
    if spec.task is not None:
        # Only a task's trial has a verifier, so only it imports one.
        from sandbox import verifier

        # The verifier's files stay here; the child (and so the agent) never has them. The
        # reference solution goes to /solution, as Harbor's oracle has it, for the agents
        # that run it; for any other the child gets none (the control plane sends none to
        # such a trial, service/suites/harbor/suite.py: this holds it even if one came).
        run.verifying = True
        solution = (
            spec.task.solution
            if runs_solution(
                spec.task.agent, spec.model.provider, installed=spec.command is not None
            )
            else None
        )
        task = dataclasses.replace(spec.task, tests={}, solution=solution)
        # The task's agent user, settled as root before the child drops to it.
        user = _agent_user(spec, run)
        spec = dataclasses.replace(spec, sandbox_uid=user.uid, sandbox_gid=user.gid)
        bare = dataclasses.replace(bare, sandbox_uid=user.uid, sandbox_gid=user.gid)
        task = dataclasses.replace(
            task,
            env={"HOME": user.home, "USER": user.name, "LOGNAME": user.name, **task.env},
        )
        verifier.lay_out_logs(user.uid, user.gid)
        if task.egress:
            # Only a trial with a way out imports one (sockets, threads of its own).
            from sandbox.egress import EgressFront, proxy_env

            run.front = EgressFront(run.channel.send)
            port = run.front.listen("agent")
            task = dataclasses.replace(task, env={**task.env, **proxy_env(port)})
        bare = dataclasses.replace(bare, task=task)
        if solution:
            try:
                verifier.place_solution(solution)
            except (OSError, ValueError) as exc:
                run.result(_lost(f"The reference solution could not be placed: {exc}"))
                to_child.close()
                return None
    to_child.write(encode(RunRequest(spec=bare)))
    return spec


def _agent_user(spec: RunSpec, run: _Supervision) -> AgentUser:
    """The task's agent user, or the sandbox user (with a note saying why) when the task's
    cannot be had: the agent runs either way, and never as root."""
    from sandbox.task_user import AgentUser, settle

    assert spec.task is not None
    uid, gid = spec.sandbox_uid, spec.sandbox_gid
    try:
        user = settle(spec.task.agent_user, uid, gid)
    except (OSError, ValueError) as exc:
        note = f"the agent user could not be had ({exc}); the agent runs as uid {uid}"
        user = AgentUser(str(uid), uid, gid, workspace.SANDBOX_HOME, note)
    if user.note is not None:
        run.emit(LifecycleEvent(step="agent_user", detail=user.note))
    return user


def supervise(channel: Channel, run_child: Callable[[Channel], None]) -> None:
    """Fork the worker's child, hand it the request, relay its messages both ways, answer
    its direct model calls; always end with one result and the session artifact."""
    try:
        unprotected = privilege.protect_from_oom()  # inherited by the child, which verifies it
    except privilege.PrivilegeError as exc:
        channel.send(ResultMessage(result=_lost(f"Failed to enter the sandbox: {exc}")))
        channel.artifact("session.jsonl", b"")
        return
    read_fd, write_fd = os.pipe()
    child_in, parent_out = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: becomes the sandboxed worker
        code = 0
        try:
            os.close(read_fd)
            os.close(parent_out)
            channel.detach()
            run_child(Channel(write_fd, os.fdopen(child_in, "rb")))
        except BaseException:
            import traceback  # only on this failure: not at every trial's start

            traceback.print_exc()
            code = 70
        finally:
            os._exit(code)
    os.close(write_fd)
    os.close(child_in)
    # Before reading anything the control plane sent: no process may read it from here.
    privilege.make_undumpable()
    to_child = _ChildInput(parent_out)
    run = _Supervision(channel)
    stop_pinning = threading.Event()
    spec = _hand_over(channel, to_child, run)
    if spec is not None and unprotected is not None:
        run.emit(LifecycleEvent(step="oom_protection", detail=f"unavailable: {unprotected}"))
    if spec is not None:
        threading.Thread(
            target=_pin_agent_first,
            args=(spec.sandbox_uid, pid, stop_pinning),
            name="examhall-oom",
            daemon=True,
        ).start()
        if channel.reader is not None:
            threading.Thread(
                target=_pump,
                args=(channel.reader, to_child, run.front),
                name="examhall-pump",
                daemon=True,
            ).start()
    try:
        _relay(read_fd, to_child, run, pid)
    finally:
        stop_pinning.set()
    _, status = os.waitpid(pid, 0)
    if not run.reported and run.listing:
        # The suite's import ended the worker (os._exit, a signal): say so to the lister.
        error = f"The worker {_how(status)} during {run.last_step or 'start'} before listing."
        channel.send(CasesMessage(cases=[], error=error))
        return
    if not run.reported:
        result = death_result(status, run.last_step)
        if run.broken is not None:
            result = dataclasses.replace(
                result, error_message=f"{run.broken} {result.error_message}"
            )
        run.result(result)
    elif run.held is not None and spec is not None and spec.task is not None:
        channel.send_line(run._completed(_verified(run, spec, run.held)))
    if run.front is not None:
        run.front.finish()
    # Bound as the events are, and never past what one channel line carries: a session the
    # control plane had to refuse would lose the transcript and stall the channel.
    cap = min(run.max_event_bytes, MAX_ARTIFACT_BYTES)
    channel.artifact("session.jsonl", session_jsonl(run.events, cap))


def _event_line(event: Any) -> bytes:
    """One event as a session line, in UTF-8 as the channel carries it: json's ASCII escapes
    would take 12 bytes for each 4-byte character, and so the session 3 times its events."""
    try:
        text = json.dumps(event, separators=(",", ":"), ensure_ascii=False)
    except (ValueError, TypeError, RecursionError):
        text = json.dumps(jsonable(event), separators=(",", ":"), ensure_ascii=False)
    # A lone surrogate (a \ud800 escape in a line of the child's) stays that JSON escape.
    return text.encode("utf-8", "backslashreplace") + b"\n"


def session_jsonl(events: list[Any], cap: int) -> bytes:
    """The session artifact: one event a line, at most `cap` bytes. Past the cap the first
    events are kept whole and a last line (a lifecycle event) says how many were left out;
    the same events always give the same bytes."""
    lines = [_event_line(event) for event in events]
    if sum(map(len, lines)) <= cap:
        return b"".join(lines)
    kept = 0
    size = 0
    room = max(0, cap - SESSION_NOTE_BYTES)
    while kept < len(lines) and size + len(lines[kept]) <= room:
        size += len(lines[kept])
        kept += 1
    note = LifecycleEvent(
        step="session_cut",
        detail=(
            f"The session keeps its first {kept} of {len(events)} events, {size} bytes of "
            f"its cap of {cap}; every event was sent to the control plane as an event too."
        ),
    )
    return b"".join(lines[:kept]) + _event_line(jsonable(note))


def _verified(run: _Supervision, spec: RunSpec, message: dict[str, Any]) -> dict[str, Any]:
    """The child's result with the verifier's verdict, when the agent's run ended cleanly
    (an agent that failed has failed: nothing is verified)."""
    from sandbox import verifier  # imported by _hand_over already: a task's trial

    result = message.get("result")
    if not isinstance(result, dict) or result.get("error_kind") is not None:
        return message
    assert spec.task is not None
    run.channel.send(StepMessage(step="verify"))
    run.last_step = "verify"
    run.emit(LifecycleEvent(step="verifier", detail=verifier.describe(spec.task.strict_verifier)))
    started = time.monotonic()
    env = {**spec.task.env, **spec.task.verifier_env}
    if run.front is not None:
        from sandbox.egress import proxy_env

        # The agent's processes are gone: so is its front. The verifier's has a port of its
        # own, so its connections are known as the verifier's.
        run.front.stop("agent")
        env.update(proxy_env(run.front.listen("verifier")))
    try:
        verdict = verifier.run(
            spec.task.tests,
            timeout_s=spec.task.verifier_timeout_s,
            env=env,
            cwd=workspace.task_workdir(spec.task.workdir),
            workspace=workspace.root(),
            strict=spec.task.strict_verifier,
        )
    except Exception as exc:  # whatever the verifier left, it is the run's failure
        if not isinstance(exc, verifier.NoReward):
            exc = verifier.NoReward(f"The verifier's result could not be read ({exc}).")
        result.update(
            outcome="error",
            score=None,
            error_kind="no_reward",
            error_message=f"{exc} A verifier without a reward fails the run.",
            failed_step="verify",
        )
        _send_verifier_log(run)
    else:
        run.channel.artifact("verifier.log", verdict.log)
        result.update(
            outcome="passed" if verdict.score >= 1.0 else "failed",
            score=verdict.score,
            judges=[{"name": "verifier", "score": verdict.score, "detail": verdict.detail}],
        )
    finally:
        timings = result.get("timings")
        if isinstance(timings, dict):
            timings["verify"] = round(time.monotonic() - started, 6)
    return message


def _send_verifier_log(run: _Supervision) -> None:
    from sandbox import verifier

    with contextlib.suppress(verifier.NoReward, OSError):
        log = verifier.read_log()
        if log is not None:
            run.channel.artifact("verifier.log", log)


def _relay(read_fd: int, to_child: _ChildInput, run: _Supervision, child: int) -> None:
    """Forward the child's lines until it ends. Suite code shares the child's process and so
    its descriptors: a line that is not a protocol message, or one too long to be one, ends
    the child (and is reported) rather than this supervisor, whose death would look like an
    infrastructure fault and be retried."""
    with os.fdopen(read_fd, "rb") as pipe:
        while line := pipe.readline(MAX_LINE_BYTES + 1):
            if not line.endswith(b"\n"):
                if len(line) > MAX_LINE_BYTES:
                    run.broken = f"The worker sent a line longer than {MAX_LINE_BYTES} bytes."
                    _end(child)
                break  # else cut off mid-write by the child's death
            try:
                message = json.loads(line)
                if not isinstance(message, dict):
                    raise ValueError("not a JSON object")
            except (ValueError, RecursionError) as exc:  # RecursionError: nested too deeply
                run.broken = f"The worker sent a line that is not a protocol message ({exc})."
                _end(child)
                break
            if message.get("type") == "model_call" and run.direct is not None:
                to_child.write(encode(run.direct.answer(message)))
                continue
            try:
                run.forward(message, line)
            except _Overflow as exc:
                run.broken = str(exc)
                _end(child)
                break


class _Overflow(Exception):
    pass


def _end(child: int) -> None:
    with contextlib.suppress(ProcessLookupError):  # already gone
        os.kill(child, signal.SIGKILL)
