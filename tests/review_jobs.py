"""Finished jobs to review, run by a real control plane whose backend is the fake one: a
worker function that answers as the sandbox's worker would, with outcomes and judges fixed
by the case and round, so the tests know which trials passed and what each judge said."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sandbox.protocol import (
    CaseInfo,
    CasesMessage,
    EventMessage,
    JudgeScore,
    MessageEvent,
    ResultMessage,
    ToolCallEvent,
    ToolResultEvent,
    TrialResult,
)
from service.backends.fake import FakeBackend, FakeWorker
from tests.docker.conftest import Server, serve

CASES = [f"case-{i}" for i in range(8)]
# This (case, round, variant) ends in a sandbox_error: unscored, so never sampled.
ERRORED = ("case-7", 1, "with_docs")
# This one ends in an agent_error: a scored error (a fail), which is sampled and reviewed.
AGENT_ERROR = ("case-6", 2, "without_docs")


def passes(case_id: str, round_: int, variant: str) -> bool:
    index = CASES.index(case_id)
    if variant == "with_docs":
        return (index + round_) % 4 != 0
    return (index + round_) % 3 == 0


# A suite whose source holds this line runs trials that never end (until killed).
HANG = "# every trial hangs"


def _suite_source(hang: bool = False) -> str:
    # A fresh comment each time: the control plane caches a suite's listing by its sha256.
    return f"""# {uuid.uuid4().hex}
{HANG if hang else ""}
from sandbox import faux, judges
from sandbox.suite import Case

SOLUTION = [faux.call("write", path="x.txt", content="ok"), faux.text("Done.")]
CASES = [
    Case(
        id=name,
        input="Write ok to x.txt",
        judges=[judges.file_equals("x.txt", "ok")],
        scripts={{"solution": SOLUTION}},
    )
    for name in {CASES!r}
]
"""


def _worker(w: FakeWorker) -> int:
    request: dict[str, Any] = json.loads(w.request)
    if request["type"] == "list_cases":
        w.say(CasesMessage([CaseInfo(id=name, scripts=["solution"]) for name in CASES]))
        return 0
    spec = request["spec"]
    if HANG in spec["suite"]["source"]:
        w.hang()
    case_id, round_, variant = spec["case_id"], spec["round"], spec["variant"]
    w.say(EventMessage(1, MessageEvent("user", f"Write ok to x.txt ({case_id})")))
    w.say(EventMessage(2, ToolCallEvent("call-1", "write", {"path": "x.txt", "content": "ok"})))
    w.say(EventMessage(3, ToolResultEvent("call-1", "write", "Wrote 2 bytes to x.txt")))
    if (case_id, round_, variant) == ERRORED:
        w.say(ResultMessage(TrialResult("error", error_kind="sandbox_error", error_message="boom")))
        return 0
    if (case_id, round_, variant) == AGENT_ERROR:
        crashed = TrialResult("error", error_kind="agent_error", error_message="agent crashed")
        w.say(ResultMessage(crashed))
        return 0
    passed = passes(case_id, round_, variant)
    w.say(EventMessage(4, MessageEvent("assistant", "Done." if passed else "I could not.")))
    judged = [
        JudgeScore(
            "file_equals", 1.0 if passed else 0.0, "x.txt is 'ok'" if passed else "no x.txt"
        ),
        # A lenient judge that passes everything: people will disagree with it.
        JudgeScore("answer_given", 1.0, "an answer was given"),
    ]
    result = TrialResult(
        "passed" if passed else "failed",
        score=1.0 if passed else 0.0,
        judges=judged,
        tool_calls=1,
        final_text="Done.",
    )
    w.say(ResultMessage(result))
    return 0


def review_server(database_url: str) -> Server:
    return serve(database_url, make_backend=lambda: FakeBackend(_worker))


def submit_review_job(server: Server, token: str, rounds: int = 2, *, hang: bool = False) -> str:
    """A finished docs-lift job of CASES, or with `hang` one whose trials are left running."""
    body = {
        "suite": {"name": "review_demo", "source": _suite_source(hang)},
        "model": {"provider": "simulated", "id": "coin?p=0.5"},
        "comparison": "docs-lift",
        "docs": "docs_lift_demo",
        "rounds": rounds,
        "seed": 3,
    }
    with server.as_team(token) as client:
        response = client.post("/v1/jobs", json=body)
    assert response.status_code == 201, response.text
    job_id: str = response.json()["id"]
    if not hang:
        assert server.wait(job_id, timeout=120)["status"] == "finished"
    return job_id


@dataclass
class Box:
    server: Server
    red: str  # team red's token
    blue: str  # team blue's
    job: str  # red's finished job
    blue_job: str


def review_box(directory: Path) -> Iterator[Box]:
    """A control plane on the fake backend with a finished job each for teams red and blue;
    stopped when the generator is closed."""
    server = review_server(f"sqlite:///{directory / 'examhall.db'}")
    try:
        red, blue = server.team_token("red"), server.team_token("blue")
        yield Box(
            server, red, blue, submit_review_job(server, red), submit_review_job(server, blue)
        )
    finally:
        server.stop()
