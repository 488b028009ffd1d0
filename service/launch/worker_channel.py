"""The control plane's side of the channel: the request in, the worker's lines out.

Every line is validated (`worker_lines.py`); model calls are answered on the channel, the
rest goes to the caller. The conversation ends when the worker's stdout does, or at the
deadline, when the sandbox is killed. Nothing here raises for a sandbox's faults: they are
recorded on the run for `settle` to judge.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from sandbox.egress import (
    EgressCloseMessage,
    EgressDataMessage,
    EgressOpenedMessage,
    EgressOpenMessage,
)
from sandbox.graded import JudgeCallMessage
from sandbox.protocol import (
    MAX_LINE_BYTES,
    EventMessage,
    LifecycleEvent,
    WorkerMessage,
    encode,
)
from sandbox.relay import ModelCallMessage, ModelReplyMessage, ReplyError
from service.backends.base import Sandbox, SandboxError
from service.launch.egress import EgressGate, TrialEgress
from service.launch.worker_lines import ChannelError, parse_worker_line

# After a kill, how long the channel and the exit state get to settle.
KILL_GRACE_S = 10.0
WAIT_S = 30.0

log = logging.getLogger(__name__)

OnMessage = Callable[[WorkerMessage], None]
# Answers the agent's model calls and the judge model's (`launch.judging.route_calls`).
OnModelCall = Callable[[ModelCallMessage | JudgeCallMessage], ModelReplyMessage]


@dataclass
class SandboxRun:
    """What happened to one sandbox, as seen from outside it."""

    sandbox_id: str | None = None
    node: str | None = None
    exit_code: int | None = None
    timed_out: bool = False
    oom_killed: bool = False
    # The backend could not run it at all (start failed): a retry, not the agent's fault.
    infra_error: str | None = None
    channel_error: str | None = None
    engine_error: str | None = None
    stderr_tail: str = ""
    # The control plane stopped the sandbox for a cap the trial passed (its egress bytes).
    limit_exceeded: str | None = None
    started_at: float = 0.0
    ended_at: float = 0.0
    timings: dict[str, float] = field(default_factory=dict)


class _Lines:
    """Splits the worker's stdout into lines, refusing one longer than the channel allows."""

    def __init__(self, on_line: Callable[[bytes], None]) -> None:
        self._on_line = on_line
        self._pending = bytearray()

    def feed(self, data: bytes) -> None:
        self._pending += data
        while (end := self._pending.find(b"\n")) >= 0:
            line = bytes(self._pending[:end])
            del self._pending[: end + 1]
            if line.strip():
                self._on_line(line)
        if len(self._pending) > MAX_LINE_BYTES:
            raise ChannelError("The worker sent a line longer than the channel allows.")


def _egress_record(message: EventMessage) -> bool:
    event = message.event
    return isinstance(event, LifecycleEvent) and event.step == "egress"


def converse(
    sandbox: Sandbox,
    request: bytes,
    run: SandboxRun,
    *,
    deadline_s: float,
    on_message: OnMessage,
    on_model_call: OnModelCall | None,
    egress: TrialEgress | None = None,
) -> None:
    """Talk to a started sandbox's worker until it ends or the deadline passes; with
    `egress`, carry the connections its policy allows (`launch.egress`)."""
    channel = sandbox.channel
    errors: list[str] = []
    sending = threading.Lock()  # the reader thread and the egress connections both send

    def send(message: object) -> None:
        line = encode(message)
        with sending:
            channel.send(line)

    def exceeded(why: str) -> None:
        run.limit_exceeded = why
        sandbox.kill()

    # The gate's records of its connections, written into the transcript by the thread that
    # takes the worker's messages (the collector is not shared across threads).
    records: queue.SimpleQueue[str] = queue.SimpleQueue()
    gate = EgressGate(egress, send, exceeded, records.put) if egress is not None else None

    def take_records() -> None:
        while True:
            try:
                detail = records.get_nowait()
            except queue.Empty:
                return
            on_message(EventMessage(0, LifecycleEvent(step="egress", detail=detail)))

    def on_line(line: bytes) -> None:
        take_records()
        try:
            message = parse_worker_line(line)
        except ChannelError as exc:
            errors.append(str(exc))
            return
        if isinstance(message, EgressOpenMessage | EgressDataMessage | EgressCloseMessage):
            if gate is not None:
                try:
                    gate.handle(message)
                except Exception:
                    # Whatever the agent sent, its connection fails, never the channel: a
                    # reader that died here would leave the trial without its result.
                    log.exception("sandbox %s: an egress message failed", sandbox.id)
            elif isinstance(message, EgressOpenMessage):
                send(EgressOpenedMessage(message.id, error="this trial's policy is offline"))
            return
        if isinstance(message, EventMessage) and _egress_record(message):
            return  # the gate records egress, where it is made: the sandbox's word is not it
        if not isinstance(message, ModelCallMessage | JudgeCallMessage):
            on_message(message)
            return
        # Answered on the reading thread: the worker waits for the reply anyway.
        reply = (
            on_model_call(message)
            if on_model_call is not None
            else ModelReplyMessage(
                id=message.id,
                error=ReplyError("provider_error", "This run has no model gateway."),
            )
        )
        try:
            send(reply)
        except OSError as exc:
            errors.append(f"Could not send a model reply: {exc}")

    lines = _Lines(on_line)
    broken = threading.Event()

    def reader() -> None:
        try:
            while chunk := channel.read():
                lines.feed(chunk)
        except (OSError, ValueError) as exc:
            errors.append(f"The channel broke: {exc}")
            broken.set()

    thread = threading.Thread(target=reader, name="examhall-channel", daemon=True)
    thread.start()
    try:
        with sending:
            channel.send(request)
    except OSError as exc:
        errors.append(f"Could not send the run request: {exc}")
    thread.join(timeout=max(0.0, deadline_s - (time.monotonic() - run.started_at)))
    if thread.is_alive():
        run.timed_out = True
        sandbox.kill()
        thread.join(timeout=KILL_GRACE_S)
    elif broken.is_set():
        # Nothing reads the worker any more: left running, it would block on its next write
        # until the deadline, and the engine's removal with it. What arrived stands (`settle`
        # keeps a result received before the break).
        log.warning("sandbox %s: %s; killing it", sandbox.id, errors[-1])
        sandbox.kill()
    if gate is not None:
        gate.close()
        if thread.is_alive():
            thread.join(timeout=KILL_GRACE_S)  # the collector is the reader's until it ends
        if not thread.is_alive():
            take_records()
    channel.close()
    try:
        ended = sandbox.wait(WAIT_S)
        run.exit_code, run.oom_killed = ended.exit_code, ended.oom_killed
        run.engine_error = ended.engine_error
        if ended.lost is not None:
            # The backend saw the sandbox's machine go from outside: not the trial's doing.
            run.infra_error = ended.lost
    except SandboxError as exc:
        errors.append(str(exc))
    run.stderr_tail = channel.stderr_tail()
    run.channel_error = "; ".join(errors) or None
