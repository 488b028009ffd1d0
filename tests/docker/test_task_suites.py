"""Task suites (Harbor's format) end to end: submitted over HTTP, their environments built on
the bootstrapped Debian base (the box has no registry: `FROM debian:bookworm-slim` falls
back to it), their trials run in those images and scored by each task's own verifier."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import tarfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.docker.conftest import PROVIDER_KEY_ENV, Server
from tests.provider_server import Answer, Received, openai_answer, provider_server

pytestmark = pytest.mark.docker

CHECK = {
    "suite": "harbor_demo",
    "variants": {"nop": {"agent": "nop"}, "oracle": {"agent": "oracle"}},
    "baseline": "nop",
}
TOOL_ENV = Path(__file__).parent.parent / "suites" / "tool_env.py"
# Three environments, each an apt install: the first build of the suite takes minutes.
BUILD_TIMEOUT_S = 1200.0


def outcomes(server: Server, job_id: str) -> dict[tuple[str, str], str]:
    trials = server.http.get(f"/v1/jobs/{job_id}/trials").json()
    return {(t["variant"], t["case_id"]): t["outcome"] for t in trials}


def test_the_shipped_tasks_pass_with_the_oracle_and_fail_with_nop(
    start_server: Callable[..., Server],
) -> None:
    server = start_server()
    created = server.submit(**CHECK)
    assert created["status"] == "building" and created["planned_trials"] == 6
    job = server.wait(created["id"], timeout=BUILD_TIMEOUT_S)
    assert job["error"] is None, job["error"]
    trials = server.http.get(f"/v1/jobs/{created['id']}/trials").json()
    seen = {(t["variant"], t["case_id"]): t for t in trials}
    tasks = ["count-lines", "git-commit", "jq-filter"]
    for task in tasks:
        assert seen[("oracle", task)]["outcome"] == "passed", seen[("oracle", task)]
        assert seen[("nop", task)]["outcome"] == "failed", seen[("nop", task)]
    # Each trial ran in its task's environment, recorded by image and digest.
    images = {t["case_id"]: (t["image"], t["image_digest"]) for t in trials}
    assert len(set(images.values())) == 3
    for image, digest in images.values():
        assert image.startswith("examhall/env:") and digest.startswith("sha256:")
    assert all(images[t["case_id"]] == (t["image"], t["image_digest"]) for t in trials)
    # ... and so says the report's record, in its JSON and its text.
    record = server.http.get(f"/v1/jobs/{created['id']}/report").json()["record"]
    recorded = {
        (e["case"], e["variant"]): (e["image"], e["image_digest"]) for e in record["environments"]
    }
    assert recorded == {(t["case_id"], t["variant"]): images[t["case_id"]] for t in trials}
    text = server.http.get(f"/v1/jobs/{created['id']}/report", params={"format": "text"}).text
    assert f"jq-filter (oracle) ran in {images['jq-filter'][0]}" in text, text

    # The same suite again: every environment is a cache hit, so the job is queued at once.
    started = time.monotonic()
    again = server.submit(suite="harbor_demo", model={"provider": "simulated", "id": "coin?p=1"})
    while server.http.get(f"/v1/jobs/{again['id']}").json()["status"] == "building":
        assert time.monotonic() - started < 30, "a cached environment was built again"
        time.sleep(0.1)
    done = server.wait(again["id"])
    assert Counter(outcomes(server, again["id"]).values()) == {"passed": 3}, done
    reused = {
        t["case_id"]: (t["image"], t["image_digest"])
        for t in server.http.get(f"/v1/jobs/{again['id']}/trials").json()
    }
    assert reused == images


def tar_of(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def upload(server: Server, files: dict[str, bytes], name: str) -> str:
    response = server.http.post(
        f"/v1/suites?name={name}",
        content=tar_of(files),
        headers={"Content-Type": "application/gzip"},
    )
    assert response.status_code in (200, 201), response.text
    suite_id: str = response.json()["id"]
    return suite_id


def task(dockerfile: str) -> dict[str, bytes]:
    return {
        "broken/task.toml": b"[verifier]\ntimeout_sec = 30\n",
        "broken/instruction.md": b"Nothing to do.",
        "broken/tests/test.sh": b"echo 1 > /logs/verifier/reward.txt\n",
        "broken/environment/Dockerfile": dockerfile.encode(),
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


def write_task(root: Path, name: str, test: bytes, solve: bytes) -> None:
    files = {
        "task.toml": CHECKED_TASK_TOML,
        "instruction.md": b"Write 42 to /app/answer.txt.",
        "environment/Dockerfile": PLAIN_ENV,
        "tests/test.sh": test,
        "solution/solve.sh": solve,
    }
    for relative, data in files.items():
        path = root / name / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


def test_check_tasks_lists_the_broken_tasks(
    start_server: Callable[..., Server], tmp_path: Path
) -> None:
    server = start_server()
    suite = tmp_path / "checked"
    write_task(suite, "sound", CHECKS_ANSWER, b"echo 42 > /app/answer.txt\n")
    write_task(suite, "lax", b"echo 1 > /logs/verifier/reward.txt\n", b"true\n")
    write_task(suite, "wrong-solution", CHECKS_ANSWER, b"echo 41 > /app/answer.txt\n")
    done = subprocess.run(
        [sys.executable, "-m", "service.cli", "check-tasks", str(suite), "--server", server.url],
        env={**os.environ, "EXAMHALL_TOKEN": server.token},
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert done.returncode == 1, done.stderr[-3000:]
    rows = {line.split()[0]: line for line in done.stdout.splitlines()[1:-1]}
    assert rows["sound"].endswith("sound"), done.stdout
    assert "passes with the nop agent" in rows["lax"], done.stdout
    assert "fails with its reference solution" in rows["wrong-solution"], done.stdout
    assert done.stdout.splitlines()[-1] == "2 of 3 task(s) broken: lax, wrong-solution"


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
        providers = tmp_path / "providers.toml"
        providers.write_text(
            f'[providers.fakeai]\nkind = "openai"\nbase_url = "{fake.url}/v1"\n'
            f'key_env = "{PROVIDER_KEY_ENV}"\n'
        )
        monkeypatch.setenv("EXAMHALL_PROVIDERS", str(providers))
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
