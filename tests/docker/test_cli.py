"""The command line, run as a user runs it: a real process, real Docker."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.docker


def examhall(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "service.cli", *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_cases_lists_the_suite(sandbox_image: str) -> None:
    done = examhall("cases", "evals/smoke.py")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["create-greeting", "fix-config", "count-lines", "notes-in-steps"]
    assert examhall("cases", "smoke").stdout == done.stdout


def test_cases_of_a_missing_suite_is_a_clear_error() -> None:
    done = examhall("cases", "no-such-suite")
    assert done.returncode == 2
    assert "neither a file nor a shipped suite" in done.stderr


def test_run_trial_json(sandbox_image: str) -> None:
    done = examhall(
        "run-trial", "--suite", "evals/smoke.py", "--case", "fix-config",
        "--model", "faux/solution", "--timeout", "60", "--json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert {"outcome", "score", "error_kind", "error_message", "events", "usage"} <= set(result)
    assert (result["outcome"], result["score"], result["error_kind"]) == ("passed", 1.0, None)
    assert [e["name"] for e in result["events"] if e["type"] == "tool_call"] == ["read", "edit"]
    assert result["usage"]["requests"] == 3


def test_run_trial_reports_a_failed_trial_with_exit_1(sandbox_image: str) -> None:
    done = examhall(
        "run-trial", "--suite", "evals/smoke.py", "--case", "fix-config", "--model", "faux/idle",
    )  # fmt: skip
    assert done.returncode == 1
    assert done.stdout.startswith("fix-config: failed")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--case", "nope", "--model", "faux/solution"], "case 'nope' is not in suite smoke"),
        (["--case", "fix-config", "--model", "faux/nope"], "has no faux script 'nope'"),
        (["--model", "gpt"], "is not PROVIDER/MODEL"),
        (["--model", "faux/solution", "--timeout", "-1"], "must be positive and finite"),
        (["--model", "faux/solution", "--timeout", "nan"], "must be positive and finite"),
    ],
)
def test_run_trial_bad_input(args: list[str], message: str) -> None:
    if "--case" not in args:
        args = ["--case", "fix-config", *args]
    done = examhall("run-trial", "--suite", "evals/smoke.py", *args)
    assert done.returncode == 2
    assert message in done.stderr
