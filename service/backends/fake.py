"""A backend that runs a Python function as the worker, in a thread: the test seam.

As httpx's `MockTransport` stands in for the network, `FakeBackend` stands in for the
engine, so that what sits above the backend protocol (the conversation, the deadline, the
settling of results, the scheduler and the store) can be tested without containers. The
worker function gets the run request and speaks the real channel protocol back; it is never
a sandbox and never runs a suite's code.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sandbox.protocol import encode
from sandbox.relay import ModelCallMessage, ModelReplyMessage, decode_reply
from service.backends.base import (
    FoundSandbox,
    LaunchSpec,
    NodeStatus,
    ReapPolicy,
    SandboxError,
    SandboxExit,
)
from service.owners import instance_id

KILLED_EXIT = 137


class Killed(Exception):
    """Raised inside a fake worker that was killed, so it stops where it is."""


class FakeWorker:
    """What a fake worker function sees: its request and its side of the channel."""

    def __init__(self, launch: LaunchSpec, request: bytes, sandbox: FakeSandbox) -> None:
        self.launch = launch
        self.request = request
        self._sandbox = sandbox

    def say(self, message: Any) -> None:
        """Send a protocol message (encoded as the worker would) or raw bytes."""
        self._sandbox.check_alive()
        data = message if isinstance(message, bytes) else encode(message)
        self._sandbox.stdout.put(data)

    def complain(self, text: str) -> None:
        self._sandbox.stderr += text

    def ask(self, call: ModelCallMessage) -> ModelReplyMessage:
        """A model call through the control plane, as the relay client makes it."""
        self.say(call)
        return decode_reply(self._sandbox.next_line())

    def hang(self) -> None:
        """Block until killed, as a worker stuck past its deadline does."""
        self._sandbox.killed.wait()
        raise Killed


# The worker: returns the exit code (or a SandboxExit, for an OOM kill).
WorkerFunction = Callable[[FakeWorker], int | SandboxExit]


class FakeChannel:
    def __init__(self, sandbox: FakeSandbox) -> None:
        self._sandbox = sandbox

    def send(self, data: bytes) -> None:
        self._sandbox.receive(data)

    def read(self) -> bytes:
        return self._sandbox.stdout.get()

    def stderr_tail(self) -> str:
        return self._sandbox.stderr

    def close(self) -> None:
        pass


class FakeSandbox:
    def __init__(self, backend: FakeBackend, launch: LaunchSpec) -> None:
        self.backend = backend
        self.launch = launch
        self.id = f"fake-{launch.trial_id}"
        self.node: str | None = "fake"
        self.channel = FakeChannel(self)
        self.timings: dict[str, float] = {}
        self.stdout: queue.Queue[bytes] = queue.Queue()
        self.stderr = ""
        self.killed = threading.Event()
        self.removed = False
        self._stdin = bytearray()
        self._lines: queue.Queue[bytes] = queue.Queue()
        self._exit: SandboxExit | None = None
        self._thread: threading.Thread | None = None

    def receive(self, data: bytes) -> None:
        if self.killed.is_set():
            raise BrokenPipeError("the fake sandbox was killed")
        self._stdin += data
        while (end := self._stdin.find(b"\n")) >= 0:
            line = bytes(self._stdin[: end + 1])
            del self._stdin[: end + 1]
            if self._thread is None:
                self._thread = threading.Thread(target=self._work, args=(line,), daemon=True)
                self._thread.start()
            else:
                self._lines.put(line)

    def next_line(self) -> bytes:
        while not self.killed.is_set():
            try:
                return self._lines.get(timeout=0.05)
            except queue.Empty:
                continue
        raise Killed

    def check_alive(self) -> None:
        if self.killed.is_set():
            raise Killed

    def _work(self, request: bytes) -> None:
        try:
            ended = self.backend.worker(FakeWorker(self.launch, request, self))
            self._exit = ended if isinstance(ended, SandboxExit) else SandboxExit(ended)
        except Killed:
            self._exit = SandboxExit(KILLED_EXIT)
        finally:
            self.stdout.put(b"")

    def kill(self) -> None:
        self.killed.set()
        self.stdout.put(b"")

    def wait(self, timeout_s: float) -> SandboxExit:
        if self._thread is not None:
            self._thread.join(timeout_s)
        if self._exit is not None:
            return self._exit
        if self.killed.is_set():
            return SandboxExit(KILLED_EXIT)
        raise SandboxError("The fake sandbox did not end in time.")

    def remove(self) -> None:
        self.kill()
        self.removed = True


def _refuse(_launch: LaunchSpec) -> str | None:
    return None


@dataclass
class FakeBackend:
    worker: WorkerFunction
    # Why a launch cannot start (its SandboxError), or None to start it.
    refuse: Callable[[LaunchSpec], str | None] = _refuse
    name: str = "fake"
    image: str = "fake/sandbox:0"
    image_digest: str | None = None
    owner: str = field(default_factory=instance_id)
    started: list[FakeSandbox] = field(default_factory=list)
    # Sandboxes as another control plane (or a crash) left them, for `reap` to find.
    leftovers: list[FoundSandbox] = field(default_factory=list)

    def start(self, launch: LaunchSpec) -> FakeSandbox:
        if (problem := self.refuse(launch)) is not None:
            raise SandboxError(problem)
        sandbox = FakeSandbox(self, launch)
        self.started.append(sandbox)
        return sandbox

    def health(self) -> str:
        return "ok"

    def reap(self, policy: ReapPolicy) -> list[str]:
        live = [FoundSandbox(s.launch.trial_id, self.owner) for s in self.started if not s.removed]
        chosen: Sequence[FoundSandbox] = policy([*live, *self.leftovers])
        for found in chosen:
            for sandbox in self.started:
                if sandbox.launch.trial_id == found.trial_id:
                    sandbox.remove()
            if found in self.leftovers:
                self.leftovers.remove(found)
        return [found.trial_id for found in chosen]

    def nodes(self) -> list[NodeStatus]:
        running = sum(1 for s in self.started if not s.removed)
        return [NodeStatus(name="fake", state="ready", trials=running)]
