"""Report identity: the JSON and text reports (and the UI's pages) of deterministic stored
jobs, as the HTTP API serves them, so two commits' reports can be diffed.

    python3 bench/report_identity.py > /tmp/after.txt
    PYTHONPATH=/path/to/other/worktree python3 bench/report_identity.py > /tmp/before.txt
    diff /tmp/before.txt /tmp/after.txt

The jobs are written into a fresh SQLite store (`--db`, else a temporary file) from a fixed
seed: a single-arm job of 10k trials (10 rounds, a few errors and retries, limits hit); a
docs-lift job of 10k trials (5 rounds, priced and unpriced trials, only errors that count
as failed runs, so no pair is blocked and the headline is published); a docs-lift job of
10k trials with blocked pairs (provider and judge errors, missing trials); a cancelled
one-round docs-lift job with unfinished trials; and a running job whose two variants use
different models, with hostile names. The reports are fetched through the real routes
(`GET /v1/jobs/{id}/report`, `?format=text`), with `--html` also `/ui/jobs`, each job's
page and a trial page, on an app whose lifespan does not run (no Docker, no scheduler):
only the store and the admin token are set. `generated_at` is masked: it is the build time.

A page is printed as what a browser makes of it, one node a line: each tag with its
attributes in order, and each text with entities decoded and runs of whitespace as one
space. Whitespace between elements where it renders as nothing (between table cells, list
items, SVG shapes) is left out, so two spellings of one page (`&quot;` or `&#34;`, a newline
between two rows or none) print the same, and anything a reader could see differs.

It imports nothing of the service beyond `create_app` and the store, so the same script runs
against any commit with `PYTHONPATH` pointing at that commit's tree.
"""

from __future__ import annotations

import argparse
import random
import re
import sys
import tempfile
import types
from datetime import datetime
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import insert, text
from sqlalchemy.orm import Session, sessionmaker

from service.store.db import make_engine, migrate, session_factory
from service.store.models import Event, Job, Suite, Trial

try:
    from service.app import create_app
except ImportError:  # before service/app.py was the composition root
    from service.api.app import create_app  # type: ignore[no-redef]

ADMIN = "report-identity-admin-token-0123456789"
CREATED = datetime(2026, 12, 1, 8, 30, 0)
EVIL = '<script>alert("x")</script>&'
_GENERATED = re.compile(r'("generated_at":")[^"]*(")|(generated )\S+Z')


def _variant(model: str) -> dict[str, Any]:
    provider, _, model_id = model.partition("/")
    return {"model": {"provider": provider, "id": model_id}, "limits": {}}


def _usage(rng: random.Random, priced: bool) -> dict[str, Any]:
    return {
        "input_tokens": rng.randint(1000, 90000),
        "output_tokens": rng.randint(100, 4000),
        "requests": rng.randint(1, 30),
        "cost_usd": round(rng.uniform(0.001, 0.2), 6) if priced else None,
    }


def _trial(
    rng: random.Random,
    job_id: str,
    n: int,
    case: str,
    arm: str,
    round_: int,
    order: int,
    attempt: int,
    *,
    error_kind: str | None,
    p: float,
    status: str = "finished",
    priced: bool = False,
) -> dict[str, Any]:
    finished = status == "finished"
    outcome = None
    if finished:
        outcome = "error" if error_kind else ("passed" if rng.random() < p else "failed")
    measured = finished and rng.random() > 0.05  # a few trials without telemetry
    return {
        "id": f"trial-{job_id[-4:]}-{n:06d}",
        "job_id": job_id,
        "case_id": case,
        "variant": arm,
        "round": round_,
        "order": order,
        "attempt": attempt,
        "status": status,
        "outcome": outcome,
        "score": {"passed": 1.0, "failed": 0.0}.get(outcome or ""),
        "error_kind": error_kind,
        "error_message": f"the trial ended {error_kind} {EVIL}" if error_kind else None,
        "model_requested": "simulated/coin?p=0.7",
        "model_returned": rng.choice(["simulated/coin?p=0.7", "simulated/coin-v2"])
        if finished
        else None,
        "tool_calls": rng.randint(0, 30) if measured else None,
        "usage": _usage(rng, priced) if measured else None,
        "judges": [{"name": "file_equals", "score": 1.0 if outcome == "passed" else 0.0}],
        "timings": {"run_agent": rng.uniform(1, 300)} if measured else None,
        "final_text": f"Done {EVIL}",
        "system_prompt_sha256": f"{hash_text(arm):016x}" * 4 if finished else None,
        "limits_hit": ["pids"] if rng.random() < 0.01 else [],
        "container_id": None,
        "owner": "identity",
        "wall_s": rng.uniform(1, 300) if finished else None,
    }


def hash_text(text: str) -> int:
    """A stable stand-in for a prompt hash (the builtin hash() is salted per process)."""
    value = 0
    for char in text:
        value = (value * 131 + ord(char)) % (2**61 - 1)
    return value


def _job(
    sessions: sessionmaker[Session],
    job_id: str,
    *,
    cases: list[str],
    arms: list[str],
    models: list[str],
    rounds: int,
    status: str,
    seed: int,
    docs: bool,
    lift: float,
    errors: float,
    retries: float,
    priced: float = 0.0,
    provider_errors: float = 0.0,
    missing: int = 0,
    unfinished: float = 0.0,
    kinds: tuple[str, ...] = ("timeout", "agent_error", "limit_exceeded", "judge_error"),
) -> None:
    rng = random.Random(job_id)
    difficulty = {case: rng.random() for case in cases}
    baseline = arms[0] if docs else None
    spec: dict[str, Any] = {
        "cases": cases,
        "baseline": baseline,
        "comparison": "docs-lift" if docs else None,
        "rounds": rounds,
        "seed": seed,
        "variants": {arm: _variant(model) for arm, model in zip(arms, models, strict=True)},
        "arms": arms if docs else [],
    }
    if docs:
        spec |= {"docs_name": "docs_lift_demo", "docs_sha256": "d0c5" * 16}
    rows: list[dict[str, Any]] = []
    order = 0
    skipped = set(rng.sample(range(len(cases) * rounds * len(arms)), missing))
    for round_ in range(1, rounds + 1):
        for case in cases:
            for arm in arms if round_ % 2 else list(reversed(arms)):
                planned = order
                order += 1
                if planned in skipped:
                    continue
                p = min(1.0, difficulty[case] + (lift if arm != arms[0] else 0.0))
                attempts = 2 if rng.random() < retries else 1
                for attempt in range(1, attempts + 1):
                    last = attempt == attempts
                    state = "finished"
                    kind: str | None = None
                    if not last:
                        kind = "infra_error"
                    elif rng.random() < unfinished:
                        state = rng.choice(["queued", "running"])
                    elif rng.random() < provider_errors:
                        kind = "provider_error"
                    elif rng.random() < errors:
                        kind = rng.choice(kinds)
                    rows.append(
                        _trial(
                            rng,
                            job_id,
                            len(rows),
                            case,
                            arm,
                            round_,
                            planned,
                            attempt,
                            error_kind=kind,
                            p=p,
                            status=state,
                            priced=rng.random() < priced,
                        )
                    )
    with sessions.begin() as session:
        sha = f"{hash_text(job_id):016x}" * 4
        session.add(Suite(sha256=sha, name="identity", source="", created_at=CREATED))
        session.flush()
        session.add(
            Job(
                id=job_id,
                status=status,
                suite_sha256=sha,
                suite_name=f"identity {EVIL}" if EVIL in "".join(cases) else "identity",
                spec=spec,
                rounds=rounds,
                seed=seed,
                max_infra_retries=1,
                planned=order,
                image="examhall/sandbox:identity",
                image_digest="sha256:" + "ab" * 32,
                service_version="identity",
                created_at=CREATED,
                finished_at=CREATED if status in ("finished", "cancelled") else None,
            )
        )
        session.flush()
        for start in range(0, len(rows), 5000):
            session.execute(insert(Trial), rows[start : start + 5000])
        first = rows[0]["id"]
        payloads: list[tuple[str, dict[str, Any]]] = [
            ("lifecycle", {"step": "run_agent", "detail": EVIL}),
            ("message", {"role": "user", "content": f"Write {EVIL}"}),
            (
                "message",
                {
                    "role": "assistant",
                    "content": "",
                    "model": "simulated/coin",
                    "stop_reason": "tool_use",
                    "usage": {"input_tokens": 10, "output_tokens": 2},
                    "tool_calls": [
                        {"id": "c1", "name": "write", "arguments": {"path": EVIL}},
                        {"id": "c2", "name": EVIL, "arguments": {"x": [1, 2.5, None]}},
                    ],
                },
            ),
            ("tool_call", {"id": "c1", "name": "write", "arguments": {"path": EVIL}}),
            ("tool_result", {"name": "write", "content": EVIL, "error": EVIL}),
            ("tool_result", {"name": "read", "content": "ok"}),
            ("message", {"role": "assistant", "content": f"Wrote {EVIL}", "stop_reason": "end"}),
            (EVIL, {"anything": EVIL}),
        ]
        for seq, (kind_, payload) in enumerate(payloads, start=1):
            session.add(Event(trial_id=first, seq=seq, type=kind_, payload=payload))


def populate(sessions: sessionmaker[Session]) -> list[str]:
    ten_k = [f"case-{i:04d}" for i in range(1000)]
    _job(
        sessions,
        "job-identity-single",
        cases=ten_k,
        arms=["default"],
        models=["simulated/coin?p=0.7"],
        rounds=10,
        status="finished",
        seed=7,
        docs=False,
        lift=0.0,
        errors=0.02,
        retries=0.01,
    )
    _job(
        sessions,
        "job-identity-lift",
        cases=ten_k,
        arms=["without_docs", "with_docs"],
        models=["simulated/coin?p=0.7"] * 2,
        rounds=5,
        status="finished",
        seed=11,
        docs=True,
        lift=0.1,
        errors=0.02,
        retries=0.01,
        priced=0.5,
        # Only errors that count as failed runs: no pair is blocked, the headline shows.
        kinds=("timeout", "agent_error", "limit_exceeded"),
    )
    _job(
        sessions,
        "job-identity-blocked",
        cases=ten_k,
        arms=["without_docs", "with_docs"],
        models=["simulated/coin?p=0.7"] * 2,
        rounds=5,
        status="finished",
        seed=13,
        docs=True,
        lift=0.05,
        errors=0.02,
        retries=0.01,
        provider_errors=0.01,
        missing=3,
    )
    _job(
        sessions,
        "job-identity-cancelled",
        cases=[f"c{i}" for i in range(7)],
        arms=["without_docs", "with_docs"],
        models=["faux/informed"] * 2,
        rounds=1,
        status="cancelled",
        seed=0,
        docs=True,
        lift=0.3,
        errors=0.1,
        retries=0.1,
        unfinished=0.2,
        missing=2,
    )
    _job(
        sessions,
        "job-identity-running",
        cases=[f"{EVIL}{i}" for i in range(4)] + ["plain"],
        arms=[f"a{EVIL}", "b"],
        models=["simulated/coin?p=0.3", "simulated/coin?p=0.9"],
        rounds=3,
        status="running",
        seed=5,
        docs=False,
        lift=0.2,
        errors=0.05,
        retries=0.05,
        unfinished=0.3,
    )
    return [
        "job-identity-single",
        "job-identity-lift",
        "job-identity-blocked",
        "job-identity-cancelled",
        "job-identity-running",
    ]


# Elements around which whitespace renders as nothing (blocks, table parts, SVG shapes).
_BLOCKS = frozenset(
    [
        "html",
        "head",
        "body",
        "header",
        "main",
        "table",
        "thead",
        "tbody",
        "tr",
        "td",
        "th",
        "dl",
        "dt",
        "dd",
        "ul",
        "ol",
        "li",
        "section",
        "h1",
        "h2",
        "h3",
        "p",
        "form",
        "label",
        "input",
        "button",
        "meta",
        "title",
        "style",
        "svg",
        "g",
        "line",
        "circle",
        "text",
    ]
)


class _Nodes(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.nodes: list[tuple[str, ...]] = []

    def handle_decl(self, decl: str) -> None:
        self.nodes.append(("decl", decl))

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.nodes.append(("start", tag, repr(attrs)))

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs)
        self.handle_endtag(tag)

    def handle_endtag(self, tag: str) -> None:
        self.nodes.append(("end", tag))

    def handle_data(self, data: str) -> None:
        if self.nodes and self.nodes[-1][0] == "text":
            data = self.nodes.pop()[1] + data
        self.nodes.append(("text", data))


def page_nodes(html: str) -> list[str]:
    parser = _Nodes()
    parser.feed(html)
    nodes = parser.nodes
    out = []
    for i, node in enumerate(nodes):
        if node[0] != "text":
            out.append(" ".join(node))
            continue
        verbatim = i > 0 and nodes[i - 1][:2] in (("start", "pre"), ("start", "style"))
        text = node[1] if verbatim else re.sub(r"\s+", " ", node[1])
        if not text.strip():
            before = nodes[i - 1] if i else ("decl",)
            after = nodes[i + 1] if i + 1 < len(nodes) else ("decl",)
            if before[0] == "decl" or before[1] in _BLOCKS or after[0] == "decl":
                continue
            if after[1] in _BLOCKS:
                continue
        out.append("text " + repr(text))
    return out


def _masked(text: str) -> str:
    return _GENERATED.sub(lambda m: f"{m[1]}GENERATED{m[2]}" if m[1] else f"{m[3]}GENERATED", text)


def _front_settings() -> Any:
    """The front door's settings, read as the commit being measured reads them."""
    try:
        from service.settings import front_settings
    except ImportError:  # before service/settings.py held them
        try:
            from service.api.settings import front_settings
        except ImportError:  # before service/settings.py
            from service.api.settings import FrontSettings

            return FrontSettings.from_env()
    return front_settings()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--db", help="SQLite file to write (default: a temporary one)")
    parser.add_argument("--html", action="store_true", help="also print the UI's pages")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="examhall-identity-") as tmp:
        path = Path(args.db) if args.db else Path(tmp) / "identity.db"
        if path.exists():
            path.unlink()
        engine = make_engine(f"sqlite:///{path}")
        migrate(engine)
        sessions = session_factory(engine)
        jobs = populate(sessions)
        app = create_app(f"sqlite:///{path}", admin_token=ADMIN)
        # The lifespan (Docker, the image, the scheduler) does not run; the routes read
        # only these.
        app.state.ctx = types.SimpleNamespace(
            sessions=sessions, admin_token=ADMIN, settings=_front_settings()
        )
        out = sys.stdout
        # Not entered as a context manager: that would run the lifespan.
        client = TestClient(app, headers={"Authorization": f"Bearer {ADMIN}"})
        for job_id in jobs:
            for query in ("", "?format=text"):
                response = client.get(f"/v1/jobs/{job_id}/report{query}")
                out.write(f"=== {job_id} report{query} {response.status_code} ")
                out.write(f"{response.headers['content-type']}\n")
                out.write(_masked(response.content.decode()) + "\n")
        if args.html:
            pages = ["/ui/jobs", *(f"/ui/jobs/{job_id}" for job_id in jobs)]
            with sessions() as session:
                # The first event written (rowid: older commits' events.id, its alias).
                first = session.query(Event.trial_id).order_by(text("events.rowid")).first()
                assert first is not None
                pages.append(f"/ui/trials/{first[0]}")
            for page in pages:
                response = client.get(page)
                out.write(f"=== {page} {response.status_code}\n")
                out.write("\n".join(page_nodes(response.text)) + "\n")
        engine.dispose()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
