"""Docs-lift end to end in real Docker: the faux agent succeeds only when the docs are in its
system prompt, so the report must show the lift, the pairs and the counterbalanced order."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import pytest

from service.backends.base import LaunchSpec
from service.backends.docker import DockerBackend, DockerSandbox, DockerSettings
from service.report.model import Report
from tests.docker.conftest import Server

pytestmark = pytest.mark.docker

DOCS_LIFT: dict[str, Any] = {
    "suite": "docs_lift_demo",
    "cases": ["write-ledger", "add-trailer", "write-config"],
    "model": {"provider": "faux", "id": "informed"},
    "comparison": "docs-lift",
    "docs": "docs_lift_demo",
    "rounds": 2,
}


def report_cli(server: Server, job_id: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "service.cli", "report", job_id, "--server", server.url],
        env={**os.environ, "EXAMHALL_TOKEN": server.token},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_docs_lift_job_shows_the_lift(start_server: Callable[..., Server]) -> None:
    server = start_server(max_containers=2)
    created = server.submit(**DOCS_LIFT)
    assert created["planned_trials"] == 3 * 2 * 2
    server.wait(created["id"])
    trials = server.http.get(f"/v1/jobs/{created['id']}/trials").json()
    report = server.http.get(f"/v1/jobs/{created['id']}/report").json()
    Report.model_validate(report)  # the documented shape

    (comparison,) = report["comparisons"]
    assert (comparison["baseline"], comparison["candidate"]) == ("without_docs", "with_docs")
    assert (comparison["pairs_total"], comparison["pairs_eligible"]) == (6, 6)
    assert comparison["blocked"] == [] and comparison["withheld_reason"] is None
    headline = comparison["headline"]
    # Computed from the stored trials: every with_docs trial passed, every without_docs failed.
    by_arm = {
        arm: [t["outcome"] for t in trials if t["variant"] == arm]
        for arm in ("with_docs", "without_docs")
    }
    assert by_arm == {"with_docs": ["passed"] * 6, "without_docs": ["failed"] * 6}
    assert (headline["candidate_pass_rate"], headline["baseline_pass_rate"]) == (1.0, 0.0)
    assert headline["lift_pp"] == 100.0
    assert (headline["wins"], headline["ties"], headline["losses"]) == (6, 0, 0)
    assert headline["mcnemar_midp"] < 0.05
    # The order: round 1 baseline first, round 2 candidate first, as stored on the trials.
    firsts = {(o["case"], o["round"]): o["first"] for o in comparison["order"]}
    assert {r: {firsts[(c, r)] for c in DOCS_LIFT["cases"]} for r in (1, 2)} == {
        1: {"without_docs"},
        2: {"with_docs"},
    }
    for trial in trials:
        partner = next(
            t
            for t in trials
            if (t["case_id"], t["round"]) == (trial["case_id"], trial["round"]) and t is not trial
        )
        first = min((trial, partner), key=lambda t: t["order"])["variant"]
        assert first == firsts[(trial["case_id"], trial["round"])]
    # The two arms saw different system prompts, one each.
    hashes = comparison["system_prompt_sha256"]
    assert len(hashes["with_docs"]) == len(hashes["without_docs"]) == 1
    assert hashes["with_docs"] != hashes["without_docs"]
    assert (
        report["record"]["docs"] == "docs_lift_demo" and len(report["record"]["docs_sha256"]) == 64
    )

    done = report_cli(server, created["id"])
    assert done.returncode == 0, done.stderr
    assert "+100.0 pp" in done.stdout


class _FailOneArm(DockerBackend):
    """The engine kills one (case, variant)'s containers as their run request arrives, before
    the worker could answer: an infrastructure fault."""

    target = ("write-ledger", "with_docs", 1)

    def start(self, launch: LaunchSpec) -> DockerSandbox:
        sandbox = super().start(launch)
        send = sandbox.channel.send

        def send_or_die(data: bytes) -> None:
            spec = json.loads(data).get("spec") or {}
            if (spec.get("case_id"), spec.get("variant"), spec.get("round")) == self.target:
                sandbox.kill()
                sandbox.wait(30)
            send(data)

        sandbox.channel.send = send_or_die  # type: ignore[method-assign]
        return sandbox


def test_infra_error_past_retries_blocks_the_pair_and_withholds_the_headline(
    start_server: Callable[..., Server], docker_client: Any, sandbox_image: str
) -> None:
    server = start_server(
        make_backend=lambda: _FailOneArm(DockerSettings(image=sandbox_image), docker_client)
    )
    created = server.submit(**{**DOCS_LIFT, "rounds": 1, "max_infra_retries": 1})
    server.wait(created["id"])
    trials = server.http.get(f"/v1/jobs/{created['id']}/trials").json()
    failing = [t for t in trials if (t["case_id"], t["variant"]) == ("write-ledger", "with_docs")]
    assert [(t["attempt"], t["error_kind"]) for t in failing] == [
        (1, "infra_error"),
        (2, "infra_error"),
    ]

    (comparison,) = server.http.get(f"/v1/jobs/{created['id']}/report").json()["comparisons"]
    assert comparison["headline"] is None
    assert comparison["withheld_reason"] == "withheld because 1 pair is blocked"
    assert comparison["blocked"] == [
        {"case": "write-ledger", "round": 1, "reasons": ["with_docs: errored (infra_error)"]}
    ]
    assert (comparison["pairs_total"], comparison["pairs_eligible"]) == (3, 2)

    done = report_cli(server, created["id"])
    assert done.returncode == 1
    assert "withheld because 1 pair is blocked" in done.stdout
