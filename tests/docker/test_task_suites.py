"""Task suites (Harbor's format) end to end: submitted over HTTP, their environments built on
the bootstrapped Debian base (the box has no registry: `FROM debian:bookworm-slim` falls
back to it), their trials run in those images and scored by each task's own verifier."""

from __future__ import annotations

import io
import itertools
import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
import tomllib
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from service.suites import shipped_dir
from tests.docker.conftest import Server, use_loopback_provider
from tests.package_index import PackageIndex, point_at_index
from tests.provider_server import Answer, Received, openai_answer, provider_server

pytestmark = pytest.mark.docker

DEMO = shipped_dir() / "harbor_demo"
# evals/harbor_demo's tasks; the one that needs a package index in its verifier, and the rest.
DEMO_TASKS = sorted(p.name for p in DEMO.iterdir() if (p / "task.toml").is_file())
ONLINE = "pytest-from-pypi"
OFFLINE_TASKS = [task for task in DEMO_TASKS if task != ONLINE]
TOOL_ENV = Path(__file__).parent.parent / "suites" / "tool_env.py"
# The shipped set's environments, two of them an apt install: the first build takes minutes.
BUILD_TIMEOUT_S = 1200.0


RUN_AGENTS_CODE = {"module-cli", "executable-tool"}


def environment_key(task: Path) -> tuple[object, ...]:
    """What a task's environment is built from: its environment/ files and its workdir."""
    files = sorted(
        (str(path.relative_to(task)), path.read_bytes())
        for path in (task / "environment").rglob("*")
        if path.is_file()
    )
    workdir = tomllib.loads((task / "task.toml").read_text())["environment"].get("workdir")
    return (workdir, *files)


def outcomes(server: Server, job_id: str) -> dict[tuple[str, str], str]:
    trials = server.http.get(f"/v1/jobs/{job_id}/trials").json()
    return {(t["variant"], t["case_id"]): t["outcome"] for t in trials}


# Cold, the shipped set's seventeen environments are built first: longer than the suite's
# 600 s default, as BUILD_TIMEOUT_S allows for.
@pytest.mark.timeout(BUILD_TIMEOUT_S + 300)
def test_check_tasks_finds_every_shipped_task_sound_under_a_policy_that_reaches_its_index(
    start_server: Callable[..., Server], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The shipped set, all of it, in one check-tasks job. Its online task pip-installs pytest
    in its verifier, so a copy of the set points that task at a package index on loopback
    (serving the wheels the python-project task vendors), under an egress policy that allows
    just that index; offline, the shipped task is reported as needing PyPI."""
    with PackageIndex(DEMO / "python-project" / "environment" / "wheels") as index:
        monkeypatch.setenv("EXAMHALL_EGRESS_POLICIES", f"local=127.0.0.2:{index.port}")
        server = start_server()
        suite = tmp_path / "harbor_demo"
        shutil.copytree(DEMO, suite)
        point_at_index(suite / ONLINE, index.url)

        unknown = check_tasks(server, str(suite), "--egress", "nope", "--cases", "json-merge")
        assert unknown.returncode == 2, unknown.stderr[-3000:]
        assert "no egress policy 'nope'; it has local, offline" in unknown.stderr
        assert server.http.get("/v1/jobs").json() == []  # refused at submission: nothing ran

        done = check_tasks(server, str(suite), "--egress", "local", "--concurrency", "1", "--json")
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        rows = {row["task"]: row for row in json.loads(done.stdout)}
        # Two tasks' tests run the agent's program as root, which check-tasks warns about.
        assert {task: row["verdict"] for task, row in rows.items()} == {
            task: "warning" if task in RUN_AGENTS_CODE else "sound" for task in DEMO_TASKS
        }, done.stdout
        # The oracle's verifier installed pytest from the index, through the control plane.
        assert "/files/pytest-8.3.4-py3-none-any.whl" in index.paths, index.paths
    (job,) = server.http.get("/v1/jobs").json()  # one job for the whole set
    trials = server.http.get(f"/v1/jobs/{job['id']}/trials").json()
    assert len(trials) == 2 * len(DEMO_TASKS)
    # --concurrency 1: the job's trials ran one after another, on a box with room for more.
    assert job["concurrency"] == 1
    spans = sorted((t["started_at"], t["finished_at"]) for t in trials)
    assert all(end <= start for (_, end), (start, _) in itertools.pairwise(spans)), spans
    # Each trial ran in its task's environment, recorded by image and digest: one image for
    # the tasks whose environments are the same, content for content.
    images = {t["case_id"]: (t["image"], t["image_digest"]) for t in trials}
    same = {task: environment_key(suite / task) for task in DEMO_TASKS}
    assert all((images[a] == images[b]) == (same[a] == same[b]) for a in same for b in same)
    assert len(set(images.values())) == len(set(same.values())) < len(DEMO_TASKS)
    for image, digest in images.values():
        assert image.startswith("examhall/env:") and digest.startswith("sha256:")
    assert all(images[t["case_id"]] == (t["image"], t["image_digest"]) for t in trials)
    # ... and so says the report's record, in its JSON and its text, with the one task that
    # asked for a network and the policy it ran under.
    record = server.http.get(f"/v1/jobs/{job['id']}/report").json()["record"]
    recorded = {
        (e["case"], e["variant"]): (e["image"], e["image_digest"]) for e in record["environments"]
    }
    assert recorded == {(t["case_id"], t["variant"]): images[t["case_id"]] for t in trials}
    assert record["networks"] == [{"case": ONLINE, "wanted": "public", "ran": "local"}]
    text = server.http.get(f"/v1/jobs/{job['id']}/report", params={"format": "text"}).text
    assert f"jq-filter (oracle) ran in {images['jq-filter'][0]}" in text, text

    # The same suite again: every environment is a cache hit, so the job is queued at once.
    # The scripted model replays each reference solution, its files beside it included.
    started = time.monotonic()
    again = server.submit(
        suite="harbor_demo",
        cases=OFFLINE_TASKS,
        model={"provider": "simulated", "id": "coin?p=1"},
    )
    while server.http.get(f"/v1/jobs/{again['id']}").json()["status"] == "building":
        assert time.monotonic() - started < 30, "a cached environment was built again"
        time.sleep(0.1)
    server.wait(again["id"])
    assert Counter(outcomes(server, again["id"]).values()) == {"passed": len(OFFLINE_TASKS)}
    reused = {
        t["case_id"]: (t["image"], t["image_digest"])
        for t in server.http.get(f"/v1/jobs/{again['id']}/trials").json()
    }
    assert reused == {task: images[task] for task in OFFLINE_TASKS}

    # Offline (no --egress), the shipped online task is broken for want of its index: pip
    # names no host, so the cause names pip's default one.
    offline = check_tasks(server, "harbor_demo", "--cases", ONLINE, "--json")
    assert offline.returncode == 1, offline.stderr[-3000:]
    (row,) = json.loads(offline.stdout)
    assert (row["verdict"], row["cause"]) == ("broken", "needs network (host pypi.org)"), row
    assert "Temporary failure in name resolution" in row["detail"], row["detail"]


def test_the_agents_repository_configuration_never_runs_in_the_git_verifier(
    start_server: Callable[..., Server],
) -> None:
    """The shipped git-commit task (its environment cached by the test above), solved right
    by an oracle that also sets core.fsmonitor, a command git runs on `status`: its verifier
    reads a copy of .git with a configuration of its own, so the agent's command never runs
    as root. (Reading /app's .git itself, as the task's verifier did, ran it.)"""
    task = DEMO / "git-commit"
    files = {
        f"git-commit/{path.relative_to(task)}": path.read_bytes()
        for path in task.rglob("*")
        if path.is_file()
    }
    files["git-commit/solution/solve.sh"] += (
        b"git config core.fsmonitor 'echo PWNED-AS-UID-$(id -u) >&2; false'\n"
    )
    server = start_server()
    created = server.submit(
        suite=upload(server, files, "fsmonitor"), variants={"oracle": {"agent": "oracle"}}
    )
    job = server.wait(created["id"], timeout=BUILD_TIMEOUT_S)
    assert job["error"] is None, job["error"]
    (trial,) = server.http.get(f"/v1/jobs/{created['id']}/trials").json()
    log = server.http.get(f"/v1/trials/{trial['id']}/artifacts/verifier.log").text
    assert trial["outcome"] == "passed", (trial, log)
    assert "PWNED" not in log, log


def tar_of(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def upload(server: Server, files: dict[str, bytes], name: str) -> str:
    suite_id: str = uploaded(server, files, name)["id"]
    return suite_id


def uploaded(server: Server, files: dict[str, bytes], name: str) -> dict[str, Any]:
    response = server.http.post(
        f"/v1/suites?name={name}",
        content=tar_of(files),
        headers={"Content-Type": "application/gzip"},
    )
    assert response.status_code in (200, 201), response.text
    shown: dict[str, Any] = response.json()
    return shown


def task(dockerfile: str, name: str = "broken") -> dict[str, bytes]:
    return {
        f"{name}/task.toml": b"[verifier]\ntimeout_sec = 30\n",
        f"{name}/instruction.md": b"Nothing to do.",
        f"{name}/tests/test.sh": b"echo 1 > /logs/verifier/reward.txt\n",
        f"{name}/environment/Dockerfile": dockerfile.encode(),
    }


def test_an_environment_that_does_not_build_ends_the_job_with_its_step_and_no_trial(
    start_server: Callable[..., Server],
) -> None:
    server = start_server()
    suite = upload(
        server,
        task("FROM debian:bookworm-slim\nRUN echo preparing && exit 3\n"),
        "failing_build",
    )
    created = server.submit(suite=suite, variants={"nop": {"agent": "nop"}})
    job: dict[str, Any] = server.wait(created["id"], timeout=300)
    assert job["status"] == "finished"
    error = job["error"] or ""
    assert "task broken" in error and "RUN echo preparing && exit 3" in error, error
    assert "preparing" in error  # the log's tail is shown
    assert server.http.get(f"/v1/jobs/{created['id']}/trials").json() == []
    notes = server.http.get(f"/v1/jobs/{created['id']}/report").json()["notes"]
    assert any(note.startswith("The job did not run: ") for note in notes), notes
    assert job["counts"]["finished"] == 0


def test_a_task_that_does_not_build_ends_its_own_trials_and_the_others_run(
    start_server: Callable[..., Server],
) -> None:
    server = start_server()
    files = {
        **task("FROM debian:bookworm-slim\nRUN echo preparing && exit 3\n"),
        **task("FROM debian:bookworm-slim\nRUN echo fine > /fine\n", name="fine"),
        # Refused at the upload (no instruction.md): named there, never planned.
        "unloaded/task.toml": b"[verifier]\ntimeout_sec = 30\n",
    }
    shown = uploaded(server, files, "half_building")
    suite = shown["id"]
    assert shown["tasks"] == ["broken", "fine"], shown
    assert [entry["task"] for entry in shown["refused"]] == ["unloaded"], shown
    named = server.http.post(
        "/v1/jobs",
        json={"suite": suite, "cases": ["unloaded"], "variants": {"n": {"agent": "nop"}}},
    )
    assert named.status_code == 422, named.text
    assert "unloaded was refused when it was uploaded" in named.text, named.text
    created = server.submit(suite=suite, variants={"nop": {"agent": "nop"}}, rounds=2)
    job: dict[str, Any] = server.wait(created["id"], timeout=300)
    assert job["status"] == "finished" and job["error"] is None, job
    assert job["counts"]["finished"] == 4 and job["counts"]["attempts"] == 4, job["counts"]
    trials = server.http.get(f"/v1/jobs/{created['id']}/trials").json()
    broken = [t for t in trials if t["case_id"] == "broken"]
    fine = [t for t in trials if t["case_id"] == "fine"]
    # The verifier of `fine` writes 1 whatever the agent did: it ran, and passed.
    assert [t["outcome"] for t in fine] == ["passed", "passed"], fine
    assert len(broken) == 2
    for trial in broken:
        assert (trial["outcome"], trial["error_kind"]) == ("error", "build_error"), trial
        assert trial["failed_step"].startswith("Step "), trial
        assert "RUN echo preparing && exit 3" in trial["error_message"]
        assert "preparing" in trial["error_message"]  # the log's tail
        assert trial["image"] is None and trial["started_at"] is None
    report = server.http.get(f"/v1/jobs/{created['id']}/report").json()
    (unbuilt,) = report["record"]["unbuilt"]
    assert unbuilt["case"] == "broken" and unbuilt["step"] == broken[0]["failed_step"]
    # Unscored: pass@1 is fine's alone, and the broken task's trials are excluded.
    (variant,) = report["variants"]
    assert variant["pass_at_1"]["value"] == 1.0 and variant["scored_trials"] == 2, variant
    assert variant["outcomes"]["excluded"] == 2, variant["outcomes"]
    assert any("did not build: broken" in note for note in report["notes"]), report["notes"]
    text = server.http.get(f"/v1/jobs/{created['id']}/report", params={"format": "text"}).text
    assert f"broken did not build at {unbuilt['step']}: " in text, text
    # Both leave the network unset, Harbor's public: each ran offline, and the report says so.
    assert report["record"]["networks"] == [
        {"case": case, "wanted": "public", "ran": "offline"} for case in ("broken", "fine")
    ]
    assert "fine asked for a network (public) and ran offline" in text, text
    assert any("asked for a network and ran offline" in note for note in report["notes"])


def test_built_in_agents_need_a_task_suite(start_server: Callable[..., Server]) -> None:
    server = start_server()
    response = server.http.post(
        "/v1/jobs", json={"suite": "smoke", "variants": {"o": {"agent": "oracle"}}}
    )
    assert response.status_code == 422, response.text
    assert "task suites" in response.text


CHECKED_TASK_TOML = b"""[agent]
timeout_sec = 60

[verifier]
timeout_sec = 30

[environment]
workdir = "/app"
"""
# One environment for all three tasks: built once, by its content hash.
PLAIN_ENV = b"FROM debian:bookworm-slim\nWORKDIR /app\n"
CHECKS_ANSWER = (
    b'[ "$(cat /app/answer.txt 2>/dev/null)" = 42 ] && echo 1 > /logs/verifier/reward.txt'
    b" || echo 0 > /logs/verifier/reward.txt\n"
)


def write_task(
    root: Path,
    name: str,
    test: bytes,
    solve: bytes | None,
    dockerfile: bytes = PLAIN_ENV,
) -> None:
    files = {
        "task.toml": CHECKED_TASK_TOML,
        "instruction.md": b"Write 42 to /app/answer.txt.",
        "environment/Dockerfile": dockerfile,
        "tests/test.sh": test,
    }
    if solve is not None:
        files["solution/solve.sh"] = solve
    for relative, data in files.items():
        path = root / name / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


def examhall(server: Server, *args: str) -> subprocess.CompletedProcess[str]:
    """The CLI against `server`, as its admin, the way a user runs it."""
    return subprocess.run(
        [sys.executable, "-m", "service.cli", *args, "--server", server.url],
        env={**os.environ, "EXAMHALL_TOKEN": server.token},
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )


def check_tasks(server: Server, *args: str) -> subprocess.CompletedProcess[str]:
    return examhall(server, "check-tasks", *args)


def test_check_tasks_gives_every_task_a_verdict_and_its_cause(
    start_server: Callable[..., Server], tmp_path: Path
) -> None:
    server = start_server()
    suite = tmp_path / "checked"
    write_task(suite, "sound", CHECKS_ANSWER, b"echo 42 > /app/answer.txt\n")
    write_task(suite, "lax", b"echo 1 > /logs/verifier/reward.txt\n", b"true\n")
    write_task(suite, "wrong-solution", CHECKS_ANSWER, b"echo 41 > /app/answer.txt\n")
    write_task(suite, "no-solution", CHECKS_ANSWER, None)
    # What a solution that fetches its tool, or installs a package, meets here.
    write_task(
        suite,
        "needs-network",
        CHECKS_ANSWER,
        b"exec 3<>/dev/tcp/example.com/80 && echo 42 > /app/answer.txt\n",
    )
    write_task(
        suite, "needs-root", CHECKS_ANSWER, b"apt-get install -y jq && echo 42 > /app/answer.txt\n"
    )
    write_task(
        suite,
        "verifier-error",
        b"echo checking /app/answer.txt\necho no runner for the check >&2\nexit 3\n",
        b"echo 42 > /app/answer.txt\n",
    )
    write_task(
        suite,
        "bad-build",
        CHECKS_ANSWER,
        b"echo 42 > /app/answer.txt\n",
        dockerfile=b"FROM debian:bookworm-slim\nWORKDIR /app\nRUN echo preparing && exit 3\n",
    )
    # Two that do not load, as real sets have: a host template, a name Harbor refuses too.
    write_task(suite, "host-env", CHECKS_ANSWER, b"true\n")
    with (suite / "host-env" / "task.toml").open("ab") as toml:
        toml.write(b'[verifier.env]\nAPI_KEY = "${API_KEY}"\n')
    write_task(suite, "bad-name", CHECKS_ANSWER, b"true\n")
    toml_text = (suite / "bad-name" / "task.toml").read_bytes()
    (suite / "bad-name" / "task.toml").write_bytes(b'[task]\nname = "bad name"\n' + toml_text)
    done = check_tasks(server, str(suite), "--json")
    assert done.returncode == 1, done.stderr[-3000:]
    rows = {row["task"]: row for row in json.loads(done.stdout)}
    assert "task host-env does not load" in done.stderr, done.stderr
    assert {task: (row["verdict"], row["cause"]) for task, row in rows.items()} == {
        "host-env": ("broken", "does not load (task.toml [verifier.env].API_KEY = '${API_KEY}')"),
        "bad-name": ("broken", "does not load (task.toml [task].name)"),
        "sound": ("sound", "passes with the oracle, fails with nop"),
        "lax": ("broken", "passes with nop"),
        "wrong-solution": ("broken", "fails with its reference solution (score 0)"),
        "no-solution": ("broken", "no reference solution"),
        "needs-network": ("broken", "needs network (host example.com)"),
        "needs-root": ("broken", "needs root"),
        "verifier-error": ("broken", "verifier error"),
        "bad-build": ("broken", "build failed at step 3"),
    }, done.stdout
    assert "are you root?" in rows["needs-root"]["detail"], rows["needs-root"]
    assert "verifier.log: no runner for the check" in rows["verifier-error"]["detail"]
    assert "preparing" in rows["bad-build"]["detail"], rows["bad-build"]
    assert "RUN echo preparing && exit 3" in rows["bad-build"]["detail"]
    # Each trial named is the task's own, and opens on the server.
    trials = {
        t["id"]: t
        for job in server.http.get("/v1/jobs").json()
        for t in server.http.get(f"/v1/jobs/{job['id']}/trials").json()
    }
    assert rows["host-env"]["trials"] == {"oracle": None, "nop": None}
    assert "control plane's environment" in rows["host-env"]["detail"]
    for task, row in rows.items():
        for agent, trial_id in row["trials"].items():
            if trial_id is not None:
                assert (trials[trial_id]["case_id"], trials[trial_id]["variant"]) == (task, agent)
                assert f"{server.url}/ui/trials/{trial_id}" in row["detail"] or task == "sound"
    assert rows["lax"]["trials"]["nop"] and rows["sound"]["trials"]["oracle"]

    # The table says the same, a task a row, with the detail indented under it.
    jobs = len(server.http.get("/v1/jobs").json())
    # --exclude leaves out a task that does not load as it does any other.
    text = check_tasks(server, str(suite), "--exclude", "bad-build,needs-root,host-env")
    assert text.returncode == 1, text.stderr[-3000:]
    assert "host-env" not in text.stderr + text.stdout, text.stderr
    lines = text.stdout.splitlines()
    rows_text = {line.split()[0]: line for line in lines[1:-1] if not line.startswith(" ")}
    assert sorted(rows_text) == sorted(set(rows) - {"bad-build", "needs-root", "host-env"})
    assert rows_text["sound"].endswith("sound    passes with the oracle, fails with nop")
    assert rows_text["needs-network"].endswith("needs network (host example.com)")
    assert lines[-1] == (
        "6 of 7 tasks broken: bad-name, lax, needs-network, no-solution, verifier-error, "
        "wrong-solution"
    )
    assert len(server.http.get("/v1/jobs").json()) == jobs + 1

    # Only the tasks named; a name that is no task runs nothing.
    only = check_tasks(server, str(suite), "--cases", "sound")
    assert only.returncode == 0, only.stderr[-3000:]
    assert only.stdout.splitlines()[-1] == "0 of 1 task broken"
    typo = check_tasks(server, str(suite), "--cases", "sound,snuod")
    assert typo.returncode == 2 and "No task named snuod" in typo.stderr, typo.stderr
    # Only tasks that do not load: their rows, and no job.
    unloaded = check_tasks(server, str(suite), "--cases", "bad-name,host-env")
    assert unloaded.returncode == 1, unloaded.stderr[-3000:]
    assert unloaded.stdout.splitlines()[-1] == "2 of 2 tasks broken: bad-name, host-env"
    assert len(server.http.get("/v1/jobs").json()) == jobs + 2


def test_a_refused_upload_prints_each_problem_on_a_line(
    start_server: Callable[..., Server], tmp_path: Path
) -> None:
    server = start_server()
    suite = tmp_path / "malformed"
    for name in ("one", "two"):
        write_task(suite, name, CHECKS_ANSWER, None)
        (suite / name / "task.toml").write_text("[verifier]\ntimeout_sec = 'soon'\n")
    done = examhall(server, "submit", str(suite), "--agent", "oracle")
    assert done.returncode == 2, done.stderr
    lines = done.stderr.splitlines()
    assert lines[0] == "examhall: POST /v1/suites: HTTP 422:", done.stderr
    problems = [line for line in lines[1:] if line.startswith("  task ")]
    assert [p.split(":")[0] for p in problems] == ["  task one", "  task two"], done.stderr
    assert "\\n" not in done.stderr and "{'loc'" not in done.stderr
    assert server.http.get("/v1/jobs").json() == []


# A solution of three files, as Harbor's tasks often have: solve.sh runs solve.py, which
# reads a data file beside it and writes answer.txt in the working directory, /app.
MULTI_FILE_SOLUTION = {
    "solve.sh": b"#!/bin/bash\nset -euo pipefail\npython3 /solution/solve.py\n",
    "solve.py": (
        b"import pathlib\n"
        b"parts = (pathlib.Path(__file__).parent / 'data' / 'parts.txt').read_text().split()\n"
        b"pathlib.Path('answer.txt').write_text(str(sum(map(int, parts))) + '\\n')\n"
    ),
    "data/parts.txt": b"40\n2\n",
}


def multi_file_task() -> dict[str, bytes]:
    files = {
        "task.toml": CHECKED_TASK_TOML,
        "instruction.md": b"Write 42 to /app/answer.txt.",
        "environment/Dockerfile": PLAIN_ENV,
        "tests/test.sh": CHECKS_ANSWER,
        **{f"solution/{name}": data for name, data in MULTI_FILE_SOLUTION.items()},
    }
    return {f"two-files/{path}": data for path, data in files.items()}


def test_a_solution_of_several_files_passes_with_the_oracle_and_the_scripted_model(
    start_server: Callable[..., Server],
) -> None:
    server = start_server()
    suite = upload(server, multi_file_task(), "multi_file_solution")
    created = server.submit(
        suite=suite,
        variants={
            "nop": {"agent": "nop"},
            "oracle": {"agent": "oracle"},
            "coin": {"model": {"provider": "simulated", "id": "coin?p=1"}},
        },
        baseline="nop",
    )
    job = server.wait(created["id"], timeout=BUILD_TIMEOUT_S)
    assert job["error"] is None, job["error"]
    trials = {t["variant"]: t for t in server.http.get(f"/v1/jobs/{created['id']}/trials").json()}
    assert trials["oracle"]["outcome"] == "passed", trials["oracle"]
    assert trials["coin"]["outcome"] == "passed", trials["coin"]
    assert trials["nop"]["outcome"] == "failed", trials["nop"]
    # The scripted model ran what the oracle runs, as its own bash call.
    events = server.http.get(f"/v1/trials/{trials['coin']['id']}/events").json()
    calls = [e["payload"] for e in events if e["type"] == "tool_call"]
    assert [c["arguments"]["command"] for c in calls] == ["cd /app && bash /solution/solve.sh\n"], (
        calls
    )


def test_a_job_names_a_pushed_task_set_and_its_report_and_export_keep_the_version(
    start_server: Callable[..., Server], tmp_path: Path
) -> None:
    """The task of the test above (its environment cached by then), pushed as a set version
    and run by that name: the job, its report and its Inspect log say which version ran."""
    server = start_server()
    pushed = server.http.post(
        "/v1/suites",
        params={"name": "two-files", "version": "1.0"},
        content=tar_of(multi_file_task()),
        headers={"Content-Type": "application/gzip"},
    )
    assert pushed.status_code == 201, pushed.text
    assert pushed.json()["version"] == "two-files@1.0"
    sha = pushed.json()["id"].removeprefix("sha256:")
    created = server.submit(suite="two-files", variants={"oracle": {"agent": "oracle"}})
    job = server.wait(created["id"], timeout=BUILD_TIMEOUT_S)
    assert job["error"] is None, job["error"]
    assert (job["suite"], job["counts"]["passed"]) == ("two-files@1.0", 1), job
    text = server.http.get(f"/v1/jobs/{created['id']}/report", params={"format": "text"}).text
    assert f"suite two-files@1.0 ({sha[:12]})" in text, text
    exported = server.http.get(f"/v1/jobs/{created['id']}/export", params={"format": "inspect"})
    log = exported.json()["eval"]
    assert (log["task"], log["task_id"], log["task_version"]) == ("two-files@1.0", sha, "1.0")


def test_a_real_models_agent_finds_no_solution(
    start_server: Callable[..., Server],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    canary: str,
) -> None:
    """A model behind the relay (a provider on loopback) looks for the solution the oracle
    and the scripted models get; its trial is scored by the verifier like any other."""
    look = (
        'echo "entries: $(ls -A /solution | wc -l)"; cat /solution/solve.sh; '
        "echo \"found: $(find / -name parts.txt -not -path '/proc/*' 2>/dev/null)end\""
    )

    def respond(request: Received) -> Answer:
        if any(m.get("role") == "tool" for m in request.body["messages"]):
            return openai_answer(text="Nothing to copy.")
        return openai_answer(tool=("bash", {"command": look}))

    with provider_server(respond) as fake:
        use_loopback_provider(fake.url, tmp_path, monkeypatch)
        server = start_server()
        suite = upload(server, multi_file_task(), "multi_file_solution")
        created = server.submit(suite=suite, model={"provider": "fakeai", "id": "gpt-test"})
        job = server.wait(created["id"], timeout=BUILD_TIMEOUT_S)
    assert job["error"] is None, job["error"]
    (trial,) = server.http.get(f"/v1/jobs/{created['id']}/trials").json()
    events = server.http.get(f"/v1/trials/{trial['id']}/events").json()
    (output,) = [e["payload"]["content"] for e in events if e["type"] == "tool_result"]
    assert "entries: 0\n" in output, output
    assert "/solution/solve.sh: No such file or directory" in output, output
    assert "found: end" in output, output  # nor is any of it anywhere else
    # Scored: the verifier ran and found no answer.
    assert trial["outcome"] == "failed" and trial["error_kind"] is None, trial


def test_a_python_suite_runs_its_cases_in_the_environment_it_declares(
    start_server: Callable[..., Server],
) -> None:
    server = start_server()
    source = TOOL_ENV.read_text()
    created = server.submit(
        suite={"name": "tool_env", "source": source}, model={"provider": "faux", "id": "solution"}
    )
    assert created["status"] == "building"
    job = server.wait(created["id"], timeout=BUILD_TIMEOUT_S)
    assert job["error"] is None, job["error"]
    (trial,) = server.http.get(f"/v1/jobs/{created['id']}/trials").json()
    assert trial["outcome"] == "passed", trial
    assert trial["image"].startswith("examhall/env:") and trial["image_digest"]


def test_an_environment_examhall_cannot_build_is_refused_at_submission(
    start_server: Callable[..., Server],
) -> None:
    server = start_server()
    source = TOOL_ENV.read_text()
    bad = source.replace('apt=["jq"]', 'pip=["requests"]')
    response = server.http.post(
        "/v1/jobs",
        json={
            "suite": {"name": "tool_env", "source": bad},
            "model": {"provider": "faux", "id": "solution"},
        },
    )
    assert response.status_code == 422, response.text
    assert "case jq-answer" in response.text and "pip" in response.text, response.text


def test_direct_credentials_never_go_into_an_image_a_suite_built(
    start_server: Callable[..., Server],
) -> None:
    server = start_server()
    for body in (
        {"suite": "harbor_demo", "credentials": "direct", "model": {"provider": "faux", "id": "x"}},
        {
            "suite": {"name": "tool_env", "source": TOOL_ENV.read_text()},
            "credentials": "direct",
            "model": {"provider": "faux", "id": "solution"},
        },
    ):
        response = server.http.post("/v1/jobs", json=body)
        assert response.status_code == 422, response.text
        assert response.json()["detail"][0]["loc"] == ["body", "credentials"], response.text
    assert server.http.get("/v1/jobs").json() == []
