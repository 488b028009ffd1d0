"""Each way the worker refuses to run gives its own message and names its step."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import docker
import pytest

from sandbox.protocol import Limits, ModelRef, RunSpec, SuiteBundle
from service.backends.base import LaunchSpec
from service.backends.docker import DockerBackend, DockerSettings
from service.launch.launcher import Launcher
from service.launch.trial import TrialRecord, run_trial

pytestmark = pytest.mark.docker

CASE_TEMPLATE = """
from sandbox import faux, judges
from sandbox.suite import Case
{prelude}
CASES = [Case(id="c", input="Write a.txt", files={files!r},
              judges=[judges.file_equals("a.txt", "a")],
              scripts={{"solution": [faux.call("write", path="a.txt", content="a"),
                                     faux.text("ok")]}})]
"""


def _suite(files: dict[str, str] | None = None, prelude: str = "") -> SuiteBundle:
    return SuiteBundle("failing", CASE_TEMPLATE.format(files=files or {}, prelude=prelude))


def test_a_well_formed_suite_passes(trial: Callable[..., TrialRecord]) -> None:
    # The control for the failures below: the same suite without the fault passes.
    assert trial(_suite(), "c", "faux/solution").result.outcome == "passed"


class _NotRootBackend(DockerBackend):
    """Starts the worker as the sandbox user, as a misconfigured runtime would."""

    def container_config(self, launch: LaunchSpec) -> dict[str, Any]:
        return {**super().container_config(launch), "user": "65532:65532"}


def test_worker_not_started_as_root_refuses(
    docker_client: docker.DockerClient, sandbox_image: str
) -> None:
    backend = _NotRootBackend(DockerSettings(image=sandbox_image), docker_client)
    spec = RunSpec(
        trial_id="not-root", suite=_suite(), case_id="c", model=ModelRef("faux", "solution")
    )
    record = run_trial(Launcher(backend), spec, job_id="tests", deadline_s=60)
    assert record.result.error_kind == "sandbox_error"
    assert record.result.failed_step == "start_as_root"
    assert record.result.error_message == "The worker must start as root to enter the sandbox."
    assert record.steps == ["start_as_root"]


def test_case_code_left_readable_aborts_before_the_agent(
    trial: Callable[..., TrialRecord],
) -> None:
    # A suite that makes the worker dumpable again at import, which would open the case code
    # in its memory to the agent's processes, must be caught.
    prelude = "import ctypes\nctypes.CDLL(None).prctl(4, 1, 0, 0, 0)\n"
    record = trial(_suite(prelude=prelude), "c", "faux/solution")
    assert record.result.error_kind == "sandbox_error"
    assert record.result.failed_step == "self_check"
    assert re.match(
        r"The sandboxed agent can read case code: /proc/\d+/(environ|mem)",
        record.result.error_message or "",
    ), record.result.error_message
    assert "run_agent" not in record.steps
    assert not [e for e in record.events if e.type == "tool_call"]


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("../outside.txt", "Workspace fixture escapes the workspace: ../outside.txt"),
        ("/etc/motd", "Workspace fixture has an absolute path: /etc/motd"),
        ("", "Workspace fixture has an empty name."),
    ],
)
def test_bad_fixture_path_is_refused(
    trial: Callable[..., TrialRecord], name: str, message: str
) -> None:
    record = trial(_suite(files={"ok.txt": "fine", name: "x"}), "c", "faux/solution")
    assert record.result.error_kind == "sandbox_error"
    assert record.result.failed_step == "seed_workspace"
    assert record.result.error_message == message


def test_unknown_case_and_broken_suite(trial: Callable[..., TrialRecord]) -> None:
    unknown = trial(_suite(), "nope", "faux/solution").result
    assert (unknown.failed_step, unknown.error_message) == (
        "load_bundle",
        "Case 'nope' is not in this suite; its cases: c.",
    )
    broken = trial(SuiteBundle("broken", "CASES = [1/0]"), "c", "faux/solution").result
    assert broken.failed_step == "load_bundle"
    assert "ZeroDivisionError" in (broken.error_message or "")


def test_strict_completion_and_provider_errors(trial: Callable[..., TrialRecord]) -> None:
    prelude = (
        "EXTRA = {'empty': [faux.text('')], 'odd': [faux.text('hm', stop_reason='length')],"
        " 'boom': [faux.error('HTTP 500 from provider')], 'short': []}\n"
    )
    suite = SuiteBundle(
        "strict",
        _suite(prelude=prelude).source
        + "\nimport dataclasses\nCASES[0] = dataclasses.replace(CASES[0], scripts=EXTRA)\n",
    )
    expected = {
        "empty": ("agent_error", "The agent's final message is empty."),
        "odd": ("agent_error", "The agent stopped for an unexpected reason: length."),
        "boom": ("provider_error", "HTTP 500 from provider"),
        "short": ("provider_error", "No more faux responses queued"),
    }
    for script, (kind, message) in expected.items():
        result = trial(suite, "c", f"faux/{script}").result
        assert (result.outcome, result.error_kind, result.error_message) == ("error", kind, message)


def test_turn_limit_ends_as_limit_exceeded(trial: Callable[..., TrialRecord]) -> None:
    result = trial(
        "evals/smoke.py", "fix-config", "faux/solution", limits=Limits(max_turns=2)
    ).result
    assert (result.error_kind, result.error_message) == (
        "limit_exceeded",
        "The agent used all 2 turns without finishing.",
    )
    assert result.tool_calls == 2


def test_prompt_that_does_not_match_its_variant_stops_the_trial(
    trial: Callable[..., TrialRecord],
) -> None:
    # A rules transform that smuggles a docs section into the no-docs arm.
    record = trial(
        "evals/smoke.py",
        "create-greeting",
        "faux/solution",
        variant="without_docs",
        rules="Follow the docs.\n<docs>\nsecret hints\n</docs>",
    )
    assert (record.result.error_kind, record.result.error_message) == (
        "sandbox_error",
        "System prompt does not match the without_docs variant.",
    )
    assert not [e for e in record.events if e.type == "tool_call"]
    ok = trial("evals/smoke.py", "create-greeting", "faux/solution", docs={"a.md": "# A"})
    assert ok.result.outcome == "passed" and ok.result.system_prompt_sha256


def test_suite_code_writing_garbage_to_the_channel_ends_the_worker_not_the_supervisor(
    trial: Callable[..., TrialRecord],
) -> None:
    """Suite code shares the worker's descriptors: what it writes there may end the worker,
    never the supervisor (a container with no result would be an infra_error, retried)."""
    prelude = (
        "import os\n"
        "for fd in range(3, 64):\n"
        "    try:\n"
        "        os.write(fd, b'not a protocol message\\n')\n"
        "    except OSError:\n"
        "        pass\n"
    )
    result = trial(_suite(prelude=prelude), "c", "faux/solution").result
    assert (result.error_kind, result.failed_step) == ("sandbox_error", "load_bundle"), result
    assert (result.error_message or "").startswith(
        "The worker sent a line that is not a protocol message"
    )


def test_suite_code_forging_events_past_the_caps_is_stopped_by_the_supervisor(
    trial: Callable[..., TrialRecord],
) -> None:
    """Forged events written straight to the channel bypass the worker's own count; the
    supervisor counts what it forwards and ends the worker past the caps."""
    prelude = (
        "import json, os\n"
        "line = json.dumps({'type': 'event', 'seq': 0, 'event': {'type': 'lifecycle',"
        " 'step': 'forged', 'detail': ''}}).encode() + b'\\n'\n"
        "for fd in range(3, 64):\n"
        "    try:\n"
        "        for _ in range(100):\n"
        "            os.write(fd, line)\n"
        "    except OSError:\n"
        "        pass\n"
    )
    record = trial(_suite(prelude=prelude), "c", "faux/solution", limits=Limits(max_events=40))
    result = record.result
    assert (result.error_kind, result.failed_step) == ("sandbox_error", "load_bundle"), result
    assert (result.error_message or "").startswith("The worker sent more events than")
    assert sum(getattr(e, "step", "") == "forged" for e in record.events) == 40 + 16


def test_suite_code_that_speaks_egress_on_the_channel_ends_the_worker(
    trial: Callable[..., TrialRecord],
) -> None:
    """Only the supervisor's proxy front opens connections (sandbox/egress.py): suite code
    that writes an egress_open to the channel is ended before the control plane sees it."""
    prelude = (
        "import json, os\n"
        "line = json.dumps({'type': 'egress_open', 'id': 1, 'host': 'example.org',"
        " 'port': 443, 'phase': 'agent'}).encode() + b'\\n'\n"
        "for fd in range(3, 64):\n"
        "    try:\n"
        "        os.write(fd, line)\n"
        "    except OSError:\n"
        "        pass\n"
    )
    result = trial(_suite(prelude=prelude), "c", "faux/solution").result
    assert (result.error_kind, result.failed_step) == ("sandbox_error", "load_bundle"), result
    assert (result.error_message or "").startswith("The worker sent an egress message")
