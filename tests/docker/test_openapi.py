"""schemathesis against the live control plane: no 5xx, no response off its OpenAPI schema."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from service.suites import shipped_dir
from service.suites.archives import pack_directory
from tests.docker.conftest import Server

pytestmark = pytest.mark.docker


def test_the_api_keeps_to_its_schema_under_generated_requests(
    start_server: Any, tmp_path: Path
) -> None:
    server: Server = start_server()
    job = server.submit(
        suite="smoke", cases=["count-lines"], model={"provider": "faux", "id": "solution"}
    )
    server.wait(job["id"])
    trial = server.http.get(f"/v1/jobs/{job['id']}/trials").json()[0]["id"]
    uploaded = server.http.post(
        "/v1/suites",
        params={"name": "fuzz"},
        content=pack_directory(shipped_dir() / "harbor_demo"),
        headers={"content-type": "application/gzip"},
    )
    assert uploaded.status_code == 201, uploaded.text
    # Real identifiers, so generated requests reach past the 404s into the handlers.
    config = tmp_path / "schemathesis.toml"
    config.write_text(
        "[parameters]\n"
        f'"path.job_id" = "{job["id"]}"\n'
        f'"path.trial_id" = "{trial}"\n'
        '"path.name" = "session.jsonl"\n'
        f'"path.suite_id" = "{uploaded.json()["id"]}"\n'
    )
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "schemathesis.cli",
            "--config-file",
            str(config),
            "run",
            f"{server.url}/openapi.json",
            "--header",
            f"Authorization: Bearer {server.token}",
            "--checks",
            "all",
            # A schema-valid body may still name a suite or case the server does not have;
            # that 422 is the API's contract, not a schema violation.
            "--exclude-checks",
            "positive_data_acceptance",
            "--max-examples",
            "25",
            "--workers",
            "1",
            "--seed",
            "1",
            "--no-color",
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )
    tail = result.stdout[-4000:]
    assert result.returncode == 0, tail
    assert "Selected: 20/20" in result.stdout and " passed" in tail
