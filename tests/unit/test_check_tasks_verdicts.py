"""check-tasks' verdicts and causes, on trials as a control plane recorded them: the rows of
GET /v1/jobs/{id}/trials and the artifacts and events of the oracle's trials, from a run of
tests/docker/test_task_suites.py's tasks on the real engine (trimmed to the fields read)."""

from __future__ import annotations

from typing import Any

import pytest

from service.cli.check_tasks import CheckError, render, selection
from service.cli.task_verdicts import (
    BuildFailure,
    TrialLogs,
    TrialRow,
    job_build_failure,
    last_attempts,
    network_hosts,
    verdict,
)

JOB = "job-48d90a7fe37f4898"
VERIFIED = [
    {
        "name": "verifier",
        "score": 0.0,
        "detail": "reward 0 (verifier: test.sh exited 0 after 0.1 s)",
    }
]
ORACLE_ARTIFACTS = ["agent.stderr", "agent.stdout", "session.jsonl", "verifier.log"]
# The error text that ended a job when a task's environment did not build (recorded).
BUILD_ERROR_TEXT = (
    "The environment of suite checked, task bad-build failed to build at 'Step 3/3 : RUN echo "
    "preparing && exit 3': The command '/bin/sh -c echo preparing && exit 3' returned a "
    "non-zero code: 3\nLast build output:\n    debian:bookworm-slim is sha256:7792feb9b945"
    "90c2f0d80fa0bf8fa6359eb0db7a41f0c20117d5e1cd630ef8be (examhall/debian-base:bookworm)\n"
    "    Step 1/3 : FROM sha256:7792feb9b94590c2f0d80fa0bf8fa6359eb0db7a41f0c20117d5e1cd630ef8"
    "be\n     ---> 7792feb9b945\n    Step 2/3 : WORKDIR /app\n     ---> Using cache\n     ---> "
    "c1edd4f76bf1\n    Step 3/3 : RUN echo preparing && exit 3\n     ---> Running in dd3e630"
    "5c457\n    preparing\n    Removing intermediate container dd3e6305c457\n    The command "
    "'/bin/sh -c echo preparing && exit 3' returned a non-zero code: 3\nFix the step (the "
    "whole log is kept with the build)."
)


def trial(case: str, variant: str, order: int, **recorded: Any) -> dict[str, Any]:
    row: dict[str, Any] = {
        "id": f"trial-ef72b170717e760a{order:08d}",
        "job_id": JOB,
        "case_id": case,
        "variant": variant,
        "round": 1,
        "order": order,
        "attempt": 1,
        "status": "finished",
        "outcome": "failed",
        "score": 0.0,
        "error_kind": None,
        "error_message": None,
        "failed_step": None,
        "image": "examhall/env:f665df6aa4fc",
        "model_requested": f"agent/{variant}",
        "tool_calls": 0,
        "judges": VERIFIED,
        "artifacts": ORACLE_ARTIFACTS if variant == "oracle" else ["session.jsonl", "verifier.log"],
    }
    row.update(recorded)
    return row


def events(exit_code: int) -> list[str]:
    return ["oracle: bash /solution/solve.sh", f"solve.sh exited {exit_code}"]


def judged(
    case: str, oracle: dict[str, Any], logs: TrialLogs, **known: Any
) -> tuple[str, str, str]:
    nop = TrialRow.model_validate(trial(case, "nop", 0))
    found = verdict(case, TrialRow.model_validate(oracle), nop, oracle_logs=logs, **known)
    return found.verdict, found.cause, found.detail


def test_a_solution_that_resolves_a_name_needs_network() -> None:
    logs = TrialLogs(
        solution="/solution/solve.sh: line 1: example.com: Temporary failure in name "
        "resolution\n/solution/solve.sh: line 1: /dev/tcp/example.com/80: Invalid argument\n",
        events=events(1),
    )
    kind, cause, detail = judged("needs-network", trial("needs-network", "oracle", 1), logs)
    assert (kind, cause) == ("broken", "needs network (host example.com)")
    assert detail.splitlines()[:2] == [
        "solve.sh exited 1",
        "/solution/solve.sh: line 1: example.com: Temporary failure in name resolution",
    ]


def test_a_verifier_that_fetches_its_runner_needs_network() -> None:
    # The cookbook's tests/test.sh (tests/fixtures/harbor_cookbook/simple-task): curl | sh.
    verifier = (
        "E: List directory /var/lib/apt/lists/partial is missing. - Acquire (30: Read-only "
        "file system)\n/tests/test.sh: line 6: curl: command not found\n"
        "curl: (6) Could not resolve host: astral.sh\n"
        "/tests/test.sh: line 8: /root/.local/bin/env: No such file or directory\n"
        "/tests/test.sh: line 10: uvx: command not found\n"
    )
    kind, cause, _ = judged(
        "simple-task",
        trial("simple-task", "oracle", 1),
        TrialLogs(verifier=verifier, events=events(0)),
    )
    assert (kind, cause) == ("broken", "needs network (host astral.sh)")


@pytest.mark.parametrize(
    ("output", "hosts"),
    [
        ("curl: (6) Could not resolve host: astral.sh", ["astral.sh"]),
        (
            "Err:1 http://deb.debian.org/debian bookworm InRelease\n"
            "  Temporary failure resolving 'deb.debian.org'",
            ["deb.debian.org"],
        ),
        (
            "fatal: unable to access 'https://github.com/org/repo.git/': Could not resolve "
            "host: github.com",
            ["github.com"],
        ),
        (
            "WARNING: Retrying (Retry(total=4, connect=None, read=None, redirect=None, status="
            "None)) after connection broken by 'NewConnectionError('<pip._vendor.urllib3."
            "connection.HTTPSConnection object at 0x7f3c2b1d6a50>: Failed to establish a new "
            "connection: [Errno -3] Temporary failure in name resolution')': /simple/pytest/\n"
            "ERROR: Could not find a version that satisfies the requirement pytest==8.4.1",
            ["pypi.org"],  # pip's retries name no host: without "Looking in indexes", PyPI
        ),
        (
            "Looking in indexes: http://127.0.0.2:40123/simple\n"
            "WARNING: Retrying (Retry(total=4, connect=None, read=None, redirect=None, status="
            "None)) after connection broken by 'NewConnectionError('<pip._vendor.urllib3."
            "connection.HTTPConnection object at 0x7f3c2b1d6a50>: Failed to establish a new "
            "connection: [Errno 111] Connection refused')': /simple/pytest/",
            ["127.0.0.2"],
        ),
        (
            "ERROR: Could not install packages due to an OSError: HTTPSConnectionPool(host="
            "'pypi.org', port=443): Max retries exceeded with url: /simple/requests/ (Caused by "
            "NewConnectionError('Failed to establish a new connection: [Errno 101] Network is "
            "unreachable'))",
            ["pypi.org"],
        ),
        ("bash: connect: Network is unreachable", []),
        ("curl: (7) Failed to connect to localhost port 8080: Connection refused", None),
        ("FAILED test_state.py::test_hello - AssertionError", None),
    ],
)
def test_network_failures_are_recognised_with_their_host(
    output: str, hosts: list[str] | None
) -> None:
    assert network_hosts(output) == hosts


def test_a_solution_refused_what_root_may_do_needs_root() -> None:
    logs = TrialLogs(
        solution="E: Could not open lock file /var/lib/dpkg/lock-frontend - open (13: "
        "Permission denied)\nE: Unable to acquire the dpkg frontend lock (/var/lib/dpkg/"
        "lock-frontend), are you root?\n",
        events=events(100),
    )
    kind, cause, detail = judged("needs-root", trial("needs-root", "oracle", 3), logs)
    assert (kind, cause) == ("broken", "needs root")
    assert "solve.sh exited 100" in detail and "are you root?" in detail


def test_a_task_without_solve_sh_has_no_reference_solution() -> None:
    oracle = trial("no-solution", "oracle", 5)
    logs = TrialLogs(solution="bash: /solution/solve.sh: No such file or directory\n")
    # Seen in the oracle's output when the directory is not at hand (a suite the server has),
    # and from the directory when it is, whatever the oracle's trial shows.
    assert judged("no-solution", oracle, logs)[:2] == ("broken", "no reference solution")
    assert judged("no-solution", oracle, TrialLogs(), has_solution=False)[:2] == (
        "broken",
        "no reference solution",
    )


def test_a_verifier_that_leaves_no_reward_is_a_verifier_error_with_its_log() -> None:
    oracle = trial(
        "verifier-error",
        "oracle",
        7,
        outcome="error",
        score=None,
        error_kind="no_reward",
        error_message="The verifier wrote no /logs/verifier/reward.txt or reward.json. A "
        "verifier without a reward fails the run.",
        failed_step="verify",
        judges=[],
    )
    logs = TrialLogs(
        verifier="checking /app/answer.txt\nno runner for the check\n", events=events(0)
    )
    kind, cause, detail = judged("verifier-error", oracle, logs, has_solution=True)
    assert (kind, cause) == ("broken", "verifier error")
    assert [line for line in detail.splitlines() if line.startswith("verifier.log")] == [
        "verifier.log: checking /app/answer.txt",
        "verifier.log: no runner for the check",
    ]


def test_a_wrong_solution_fails_with_its_reference_solution() -> None:
    oracle = trial("wrong-solution", "oracle", 9)
    kind, cause, _ = judged("wrong-solution", oracle, TrialLogs(events=events(0)))
    assert (kind, cause) == ("broken", "fails with its reference solution (score 0)")


def test_build_error_trials_name_the_failing_step() -> None:
    # Main's preparer keeps the job running and stores the task's trials finished with
    # error_kind build_error, the build's text and the step (service/scheduler/prepare.py).
    rows = [
        TrialRow.model_validate(
            trial(
                "bad-build",
                variant,
                order,
                outcome="error",
                score=None,
                error_kind="build_error",
                error_message=BUILD_ERROR_TEXT,
                failed_step="Step 3/3",
                judges=[],
                artifacts=[],
            )
        )
        for order, variant in enumerate(("nop", "oracle"))
    ]
    found = verdict("bad-build", rows[1], rows[0], has_solution=True)
    assert (found.verdict, found.cause) == ("broken", "build failed at step 3")
    assert (found.oracle, found.nop) == ("build_error", "build_error")
    lines = found.detail.splitlines()
    assert lines[0].endswith("returned a non-zero code: 3") and "'Step 3/3 : RUN" in lines[0]
    assert "    preparing" in lines and lines[1] == "last build output:"
    assert "Fix the step (the whole log is kept with the build)." in lines
    assert not any(line.startswith("also:") for line in lines)
    # A task that also lacks its solution says so under the build's failure.
    unsolved = verdict("bad-build", rows[1], rows[0], has_solution=False)
    assert unsolved.cause == "build failed at step 3"
    assert "also: no reference solution (add solution/solve.sh)" in unsolved.detail


def test_a_job_ended_by_a_build_names_its_task() -> None:
    # Before main's preparer, the first environment that did not build ended the job.
    failure = job_build_failure(BUILD_ERROR_TEXT, ["bad", "bad-build", "sound"])
    assert failure is not None and failure.task == "bad-build"
    assert failure.step == "Step 3/3 : RUN echo preparing && exit 3"
    assert failure.cause == "build failed at step 3"
    assert job_build_failure(BUILD_ERROR_TEXT, ["sound"]) is None
    assert job_build_failure("Suite x cannot run: no such suite", ["bad-build"]) is None
    refused = BuildFailure(
        "t", "checking the image", "The environment of suite s, task t is refused: musl."
    )
    assert refused.cause == "build failed: the environment is refused"
    found = verdict("bad-build", None, None, build=failure)
    assert (found.verdict, found.cause, found.trials) == (
        "broken",
        "build failed at step 3",
        {"oracle": None, "nop": None},
    )


def test_nop_and_workspace_verdicts() -> None:
    oracle = TrialRow.model_validate(trial("lax", "oracle", 1, outcome="passed", score=1.0))
    passed = TrialRow.model_validate(trial("lax", "nop", 0, outcome="passed", score=1.0))
    lax = verdict("lax", oracle, passed, where={passed.id: f"http://box/ui/trials/{passed.id}"})
    assert (lax.verdict, lax.cause) == ("broken", "passes with nop")
    assert f"nop trial: http://box/ui/trials/{passed.id}" in lax.detail.splitlines()
    failed = TrialRow.model_validate(trial("sound", "nop", 0))
    sound = verdict("sound", oracle, failed)
    assert (sound.verdict, sound.detail) == ("sound", "")
    # A nop whose verifier left no reward failed, as the report counts it.
    no_reward = trial("sound", "nop", 0, outcome="error", error_kind="no_reward", score=None)
    assert verdict("sound", oracle, TrialRow.model_validate(no_reward)).verdict == "sound"
    unscored = trial("sound", "nop", 0, outcome="error", error_kind="infra_error", score=None)
    found = verdict("sound", oracle, TrialRow.model_validate(unscored))
    assert (found.verdict, found.cause) == (
        "broken",
        "the nop agent's run was not scored (infra_error)",
    )
    warned = verdict("sound", oracle, failed, warnings=["warning: sound: tests/test.sh runs"])
    assert warned.verdict == "warning"
    assert warned.detail.splitlines() == [
        "warning: sound: tests/test.sh runs",
        f"oracle trial: {oracle.id}",
        f"nop trial: {failed.id}",
    ]


def test_the_last_attempt_decides_and_the_table_lists_every_task() -> None:
    retried = [
        trial("sound", "oracle", 1, attempt=2, outcome="passed", score=1.0, id="t-2"),
        trial("sound", "oracle", 1, outcome="error", error_kind="infra_error", id="t-1"),
        trial("sound", "nop", 0),
    ]
    last = last_attempts(retried)
    assert last[("sound", "oracle")].id == "t-2"
    rows = [
        verdict("sound", last[("sound", "oracle")], last[("sound", "nop")]),
        verdict("lax", None, None, has_solution=False),
    ]
    assert render(rows).splitlines() == [
        "TASK   ORACLE       NOP          VERDICT  CAUSE",
        "sound  passed       failed       sound    passes with the oracle, fails with nop",
        "lax    did not run  did not run  broken   no reference solution",
        "    the task has no solution/solve.sh, so nothing shows it can be solved; add one",
        "1 of 2 tasks broken: lax",
    ]


def test_cases_and_exclude_name_tasks_that_exist() -> None:
    known = ["a", "b", "c"]
    assert selection(known, [], []) is None
    assert selection(known, ["c", "a"], []) == ["c", "a"]
    assert selection(known, [], ["b"]) == ["a", "c"]
    assert selection(None, ["x"], []) == ["x"]  # the server knows the suite: it checks
    with pytest.raises(CheckError, match="No task named d, e in the suite; its tasks: a, b, c"):
        selection(known, ["a", "d"], ["e"])
    with pytest.raises(CheckError, match="leave no task"):
        selection(known, ["a"], ["a"])
    with pytest.raises(CheckError, match="--exclude needs the suite's task list"):
        selection(None, [], ["a"])


def test_a_host_the_egress_policy_refused_is_named_from_the_trials_events() -> None:
    # The egress event the supervisor writes (sandbox/egress.py), as a trial under a policy
    # that does not name files.pythonhosted.org records it.
    refused = (
        "verifier files.pythonhosted.org:443 refused: files.pythonhosted.org is not among the "
        "hosts this trial may reach (egress policy mirrors), 0 bytes out, 0 in"
    )
    allowed = "verifier pypi.org:443 allowed, 1200 bytes out, 5300 in"
    logs = TrialLogs(
        verifier="ERROR: Could not install packages due to an OSError: Tunnel connection "
        "failed: 403 Forbidden\n",
        events=[*events(0), allowed, refused],
    )
    kind, cause, detail = judged("needs-files", trial("needs-files", "oracle", 1), logs)
    assert (kind, cause) == ("broken", "needs network (host files.pythonhosted.org)")
    assert "refused files.pythonhosted.org: files.pythonhosted.org is not among" in detail
    assert any(line.startswith("run it under an egress policy") for line in detail.splitlines())


def test_a_certificate_the_sandbox_does_not_trust_is_a_network_cause_with_its_host() -> None:
    verifier = (
        "WARNING: Retrying (Retry(total=0, connect=None, read=None, redirect=None, status=None))"
        " after connection broken by 'SSLError(SSLCertVerificationError(1, '[SSL: CERTIFICATE_"
        "VERIFY_FAILED] certificate verify failed: unable to get local issuer certificate "
        "(_ssl.c:1006)'))': /simple/pytest/\nCould not fetch URL https://pypi.org/simple/pytest/:"
        " There was a problem confirming the ssl certificate: HTTPSConnectionPool(host='pypi.org',"
        " port=443): Max retries exceeded\n"
    )
    kind, cause, detail = judged(
        "tls", trial("tls", "oracle", 1), TrialLogs(verifier=verifier, events=events(0))
    )
    assert (kind, cause) == ("broken", "needs network (host pypi.org)")
    assert "TLS-inspecting proxy" in detail, detail


def test_the_verifiers_own_output_names_a_read_only_file_system_and_the_strict_verifier() -> None:
    read_only = TrialLogs(
        verifier="cp: cannot create regular file '/proc/sys/x': Read-only file system\n",
        events=events(0),
    )
    kind, cause, detail = judged("ro", trial("ro", "oracle", 1), read_only)
    assert (kind, cause) == ("broken", "read-only file system")
    assert "/proc/sys/x" in detail
    # Refused what root may do: the strict verifier's doing, never the author's solution...
    refused = "useradd: Permission denied.\nuseradd: cannot lock /etc/passwd; try again later.\n"
    strict = TrialLogs(
        verifier=refused,
        events=[*events(0), "the strict verifier: tests/test.sh as uid 0 holding no capability"],
    )
    kind, cause, detail = judged("strict", trial("strict", "oracle", 1), strict)
    assert (kind, cause) == ("broken", "needs root")
    assert 'verifier = "strict"' in detail
    # ...while under Harbor's own verifier the same words are the tests' to explain.
    harbor = TrialLogs(verifier=refused, events=events(0))
    assert judged("h", trial("h", "oracle", 1), harbor)[1].startswith("fails with its reference")


def test_a_task_that_does_not_load_has_its_row_and_no_trial() -> None:
    problems = [
        "task t: task.toml [verifier.env].KEY = '${KEY}': a ${VAR} template is read from the "
        "host's environment in Harbor; write the value itself",
    ]
    row = verdict("t", None, None, refused=problems)
    assert (row.verdict, row.cause) == (
        "broken",
        "does not load (task.toml [verifier.env].KEY = '${KEY}')",
    )
    assert row.trials == {"oracle": None, "nop": None}
    assert row.detail.startswith("task.toml [verifier.env].KEY = '${KEY}': a ${VAR} template")
    assert "t     did not run  did not run  broken   does not load" in render([row])
