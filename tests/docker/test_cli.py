"""The command line, run as a user runs it: a real process, real Docker."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.provider_server import Answer, Received, openai_answer, provider_server

pytestmark = pytest.mark.docker


def examhall(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "service.cli", *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env=env,
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


def test_run_trial_with_a_relayed_model(tmp_path: Path, sandbox_image: str) -> None:
    def answer(request: Received) -> Answer:
        if any(m.get("role") == "tool" for m in request.body["messages"]):
            return openai_answer(text="Done.")
        return openai_answer(tool=("write", {"path": "hello.txt", "content": "Hello, exam hall!"}))

    with provider_server(answer) as fake:
        providers = tmp_path / "providers.toml"
        providers.write_text(
            f'[providers.fakeai]\nkind = "openai"\nbase_url = "{fake.url}/v1"\n'
            'key_env = "FAKEAI_KEY"\n'
            '[providers.fakeai.prices."gpt-test"]\ninput = 1.0\noutput = 1.0\n'
        )
        env = {**os.environ, "EXAMHALL_PROVIDERS": str(providers), "FAKEAI_KEY": "k-123"}
        done = examhall(
            "run-trial", "--suite", "evals/smoke.py", "--case", "create-greeting",
            "--model", "fakeai/gpt-test", "--json", env=env,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        result = json.loads(done.stdout)
        assert (result["outcome"], result["model_returned"]) == ("passed", "gpt-test-2026-01-01")
        assert result["cost_usd"] == pytest.approx(240e-6)
        assert len(fake.received) == 2
        missing_key = examhall(
            "run-trial", "--suite", "evals/smoke.py", "--case", "create-greeting",
            "--model", "fakeai/gpt-test", env={**env, "FAKEAI_KEY": ""},
        )  # fmt: skip
        assert missing_key.returncode == 2
        assert "set the environment variable FAKEAI_KEY" in missing_key.stderr
