"""The launch layer above the backend protocol (conversation, deadline, settling, the
launcher's bookkeeping), driven through the fake backend: what our code makes of a worker's
messages and of a sandbox's end, for every backend alike."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable

from sandbox.conversation import ModelRequest, UserMessage
from sandbox.protocol import (
    MAX_LINE_BYTES,
    EventMessage,
    LifecycleEvent,
    ModelRef,
    ResultMessage,
    RunSpec,
    StepMessage,
    SuiteBundle,
    TrialResult,
)
from sandbox.relay import ModelCallMessage, ModelReplyMessage
from service.backends.base import FoundSandbox, LaunchSpec, SandboxExit
from service.backends.fake import KILLED_EXIT, FakeBackend, FakeWorker, WorkerFunction
from service.launch.launcher import Launcher
from service.launch.trial import SESSION, TrialRecord, run_trial
from service.launch.worker_channel import SandboxRun

SPEC = RunSpec(
    trial_id="t-1", suite=SuiteBundle("s", "CASES = []"), case_id="c", model=ModelRef("faux", "x")
)
PASSED = TrialResult("passed", score=1.0)


def _run(
    worker: WorkerFunction,
    deadline_s: float = 10.0,
    refuse: Callable[[LaunchSpec], str | None] = lambda launch: None,
) -> tuple[FakeBackend, TrialRecord]:
    fake = FakeBackend(worker, refuse=refuse)
    return fake, run_trial(Launcher(fake), SPEC, job_id="j", deadline_s=deadline_s)


def test_a_reported_result_stands_and_the_transcript_is_kept_from_the_events() -> None:
    def worker(w: FakeWorker) -> int:
        assert json.loads(w.request)["spec"]["trial_id"] == "t-1"
        w.say(StepMessage("run_agent"))
        w.say(EventMessage(1, LifecycleEvent("agent", "hello")))
        w.say(ResultMessage(PASSED))
        return 0

    fake, record = _run(worker)
    assert record.result.outcome == "passed"
    assert record.steps == ["run_agent"]
    # No session artifact came, so the launch rebuilt it from the events that did.
    session = record.artifacts[SESSION].decode()
    assert [json.loads(line)["detail"] for line in session.splitlines()] == ["hello"]
    assert [s.removed for s in fake.started] == [True]


def test_a_worker_past_its_deadline_is_killed_and_its_result_is_a_timeout() -> None:
    def worker(w: FakeWorker) -> int:
        w.say(ResultMessage(PASSED))
        w.hang()
        return 0

    fake, record = _run(worker, deadline_s=0.3)
    result = record.result
    # Even a reported pass is not scored once the deadline passed.
    assert (result.outcome, result.error_kind, result.score) == ("error", "timeout", None)
    assert record.sandbox is not None and record.sandbox.timed_out
    assert fake.started[0].killed.is_set()


def test_a_sandbox_that_could_not_start_is_an_infra_error() -> None:
    fake, record = _run(lambda w: 0, refuse=lambda launch: "no room on the engine")
    result = record.result
    assert (result.error_kind, result.error_message) == ("infra_error", "no room on the engine")
    assert fake.started == []


def test_a_silent_end_is_an_infra_error_and_an_oom_kill_a_limit() -> None:
    _, silent = _run(lambda w: 3)
    assert silent.result.error_kind == "infra_error"
    assert "code 3" in (silent.result.error_message or "")
    _, oom = _run(lambda w: SandboxExit(137, oom_killed=True))
    assert oom.result.error_kind == "limit_exceeded"
    # An engine that could not run the container says why; the trial says it too.
    _, refused = _run(lambda w: SandboxExit(128, engine_error="failed to join network x"))
    assert refused.result.error_kind == "infra_error"
    assert "the engine said: failed to join network x" in (refused.result.error_message or "")


def test_a_malformed_line_is_named_in_the_error() -> None:
    def worker(w: FakeWorker) -> int:
        w.say(b'{"type": "nonsense"}\n')
        return 1

    _, record = _run(worker)
    assert "malformed message" in (record.result.error_message or "")


def test_a_line_past_the_channel_limit_ends_the_sandbox_and_what_came_stands() -> None:
    def worker(w: FakeWorker) -> int:
        w.say(EventMessage(1, LifecycleEvent("agent", "hello")))
        w.say(ResultMessage(PASSED))
        w.say(b"x" * (MAX_LINE_BYTES + 1))  # and no end of line
        w.hang()  # as a worker blocked on a write nobody reads
        return 0

    fake, record = _run(worker)
    assert record.result.outcome == "passed"
    assert [e.detail for e in record.events] == ["hello"]  # type: ignore[union-attr]
    run = record.sandbox
    assert run is not None and "longer than the channel allows" in (run.channel_error or "")
    # Killed as soon as the channel broke, so its end was read rather than waited out.
    assert fake.started[0].killed.is_set() and run.exit_code == KILLED_EXIT
    assert "did not end in time" not in (run.channel_error or "")


def test_a_model_call_without_a_gateway_gets_a_provider_error_reply() -> None:
    replies: list[ModelReplyMessage] = []

    def worker(w: FakeWorker) -> int:
        request = ModelRequest(system="s", messages=(UserMessage("hi"),))
        replies.append(w.ask(ModelCallMessage(id="m1", request=request)))
        w.say(ResultMessage(TrialResult("failed", score=0.0)))
        return 0

    _, record = _run(worker)
    assert record.result.outcome == "failed"
    assert replies[0].id == "m1" and replies[0].error is not None
    assert replies[0].error.kind == "provider_error"


def test_the_launcher_stops_what_runs_and_its_reaper_spares_it() -> None:
    started = threading.Event()

    def worker(w: FakeWorker) -> int:
        started.set()
        w.hang()
        return 0

    fake = FakeBackend(worker)
    fake.leftovers.append(FoundSandbox("left-by-a-crash", "elsewhere:1:x"))
    launcher = Launcher(fake)
    runs = []
    thread = threading.Thread(
        target=lambda: runs.append(
            launcher.run(LaunchSpec("running", "j"), b'{"type": "run"}\n', deadline_s=30,
                         on_message=lambda m: None)
        )
    )  # fmt: skip
    thread.start()
    assert started.wait(5)
    # Everything is offered to the policy; what runs here is spared whatever it says.
    assert launcher.reap(lambda found: True) == ["left-by-a-crash"]
    assert launcher.running_trials() == {"running"}
    began = time.monotonic()
    launcher.stop({"running"})
    thread.join(5)
    assert time.monotonic() - began < 5 and not runs[0].timed_out
    assert runs[0].exit_code == 137 and launcher.running_trials() == set()


def test_a_trial_stopped_while_its_sandbox_starts_is_killed_once_it_is_up() -> None:
    """A cancel or a shutdown that comes while the backend is still starting the sandbox
    is not lost: the run ends at once instead of at its deadline."""
    starting, release = threading.Event(), threading.Event()

    def slow_start(launch: LaunchSpec) -> None:
        starting.set()
        release.wait(10)

    def worker(w: FakeWorker) -> int:
        w.hang()
        return 0

    launcher = Launcher(FakeBackend(worker, refuse=slow_start))
    runs: list[SandboxRun] = []
    thread = threading.Thread(
        target=lambda: runs.append(
            launcher.run(LaunchSpec("slow", "j"), b'{"type": "run"}\n', deadline_s=60,
                         on_message=lambda m: None)
        )
    )  # fmt: skip
    thread.start()
    assert starting.wait(5)
    launcher.stop({"slow"})
    release.set()
    thread.join(10)
    assert not thread.is_alive(), "the stopped trial ran on to its deadline"
    assert runs[0].exit_code == 137 and not runs[0].timed_out
