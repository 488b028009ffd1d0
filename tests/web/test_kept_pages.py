"""A job's page is kept by (job, status, change marker, caller) and rendered again when any
of them changes: a kept page is never an older state of its job. Real SQLite, the real
queue and results, the route's own function."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from sandbox.protocol import TrialResult
from service.domain.job_spec import JobRequest
from service.domain.planner import resolve_design
from service.domain.status import JobStatus
from service.environments.builder import BUILDING
from service.scheduler.build_progress import BuildProgress
from service.store.db import make_engine, migrate, session_factory
from service.store.jobs import create_job
from service.store.queue import claim
from service.store.results import record_result
from service.suites.python import load_suite
from service.teams import Principal
from service.web.routes import _job_page

ADMIN = Principal(team_id=None, name="admin", admin=True)


def _page(context: Any, job_id: str, caller: Principal = ADMIN) -> str:
    return bytes(_job_page(context, caller, job_id).body).decode()


def _cells(page: str) -> list[str]:
    return re.findall(r'data-outcome="([a-z]+)"', page)


def test_a_kept_page_is_rendered_again_when_its_job_changes(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'store.db'}")
    migrate(engine)
    sessions = session_factory(engine)
    request = JobRequest.model_validate(
        {"suite": "smoke", "model": {"provider": "simulated", "id": "coin?p=1"}, "rounds": 2}
    )
    with sessions.begin() as session:
        job_id = create_job(
            session,
            request,
            load_suite("smoke"),
            resolve_design(request, ["a", "b"]),
            image="examhall/sandbox:test",
            image_digest=None,
        ).id
    context = SimpleNamespace(sessions=sessions)
    first = _page(context, job_id)
    assert _cells(first) == ["queued"] * 4
    assert _page(context, job_id) == first  # nothing changed: the same page

    owner = "tests:1:kept"
    trial_id = claim(sessions, owner, 1, [])[0].trial_id
    assert _cells(_page(context, job_id)).count("running") == 1
    record_result(
        sessions,
        owner,
        trial_id,
        TrialResult("passed", score=1.0),
        artifacts={},
        sandbox_id=None,
        wall_s=1.0,
        cost_usd=None,
    )
    after = _page(context, job_id)
    assert sorted(_cells(after)) == ["passed", "queued", "queued", "queued"]
    assert "1/4 finished" in after

    other = Principal(team_id=None, name="someone else", admin=True)
    assert "signed in as someone else" in _page(context, job_id, other)
    assert "signed in as admin" in _page(context, job_id)
    engine.dispose()


def test_a_building_jobs_page_tells_its_builds_as_they_go(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'store.db'}")
    migrate(engine)
    sessions = session_factory(engine)
    request = JobRequest.model_validate(
        {"suite": "smoke", "model": {"provider": "simulated", "id": "coin?p=1"}}
    )
    with sessions.begin() as session:
        job = create_job(
            session,
            request,
            load_suite("smoke"),
            resolve_design(request, ["a"]),
            image="examhall/sandbox:test",
            image_digest=None,
        )
        job.status = JobStatus.BUILDING  # as a task suite's job waits for its environments
        job_id = job.id
    context = SimpleNamespace(sessions=sessions)
    progress = BuildProgress(sessions, job_id, ["a"])
    progress.line("a", f"{BUILDING} a (examhall/env:aaaa)...")
    progress.line("a", "Step 2/3 : RUN apt-get install -y jq")
    progress.write(force=True)
    first = _page(context, job_id)
    assert "a: building Step 2/3 : RUN apt-get install -y jq" in first, first
    # The next step, with no change to the job's trials: the page says it, not the last one.
    progress.line("a", "Step 3/3 : RUN make")
    progress.write(force=True)
    assert "a: building Step 3/3 : RUN make" in _page(context, job_id)
    engine.dispose()
