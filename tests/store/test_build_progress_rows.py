"""A job's build progress on its row (service/scheduler/build_progress.py), on SQLite and
PostgreSQL: what a second try at preparing a job tells of the tasks the first try built.

A fault of ours (the store, the engine) ends a try at preparing a job, and the preparer tries
the job again; the images the first try built are then found by their hash. The row must not
turn those tasks from built to cached: the job did build them."""

from __future__ import annotations

import time
from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from service.environments.builder import BUILDING
from service.scheduler.build_progress import BuildProgress
from service.store.models import Job
from tests.store.conftest import submit

CASES = ["alpha", "beta", "gamma"]


def row(sessions: sessionmaker[Session], job_id: str) -> dict[str, Any]:
    with sessions() as session:
        job = session.get(Job, job_id)
        assert job is not None
        return dict(job.builds or {})


def test_a_second_try_keeps_what_the_first_built(sessions: sessionmaker[Session]) -> None:
    job = submit(sessions)
    first = BuildProgress(sessions, job.id, CASES)
    first.write(force=True)
    first.line("alpha", f"{BUILDING} alpha (examhall/env:aaaa)...")
    first.line("alpha", "Step 2/2 : RUN make")
    first.end("alpha", built=True)
    first.line("beta", f"{BUILDING} beta (examhall/env:bbbb)...")
    first.write(force=True)  # the preparer's own write, at most a second later
    # The first try ends here, a fault of ours: beta was building, gamma waiting.
    told = row(sessions, job.id)
    assert [told[case]["state"] for case in CASES] == ["built", "building", "waiting"]

    second = BuildProgress(sessions, job.id, CASES, told)
    second.write(force=True)
    # From its first write, the second try still says alpha is built (never waiting again).
    assert row(sessions, job.id)["alpha"] == told["alpha"]
    second.end("alpha", built=False)  # found by its hash: the first try's image
    second.line("beta", f"{BUILDING} beta (examhall/env:bbbb)...")
    second.end("beta", built=True)
    second.end("gamma", built=False)  # someone else's image, found by its hash
    ended = row(sessions, job.id)
    assert {case: ended[case]["state"] for case in CASES} == {
        "alpha": "built",
        "beta": "built",
        "gamma": "cached",
    }
    assert ended["alpha"]["step"] == "Step 2/2 : RUN make"


def test_a_task_built_before_and_failing_now_is_told_failed(
    sessions: sessionmaker[Session],
) -> None:
    job = submit(sessions)
    first = BuildProgress(sessions, job.id, CASES)
    first.end("alpha", built=True)
    second = BuildProgress(sessions, job.id, CASES, row(sessions, job.id))
    # Its image went meanwhile (the cache evicted it), and building it again fails.
    second.line("alpha", f"{BUILDING} alpha (examhall/env:aaaa)...")
    second.end("alpha", failed=True, failed_step="Step 2/2")
    ended = row(sessions, job.id)["alpha"]
    assert (ended["state"], ended["failed_step"]) == ("failed", "Step 2/2")


def test_without_an_earlier_try_an_image_found_by_hash_is_cached(
    sessions: sessionmaker[Session],
) -> None:
    job = submit(sessions)
    progress = BuildProgress(sessions, job.id, CASES, row(sessions, job.id))
    for case in CASES:
        progress.end(case, built=False)
    assert {case: build["state"] for case, build in row(sessions, job.id).items()} == dict.fromkeys(
        CASES, "cached"
    )


def test_an_agents_install_is_told_after_the_tasks_and_a_silent_step_keeps_its_time(
    sessions: sessionmaker[Session],
) -> None:
    job = submit(sessions)
    progress = BuildProgress(sessions, job.id, CASES, agents=["agent with-llm"])
    progress.write(force=True)
    waiting = row(sessions, job.id)["agent with-llm"]
    assert (waiting["state"], waiting["index"], waiting["of"]) == ("waiting", 4, 4)
    with progress.ticking():
        progress.agent_line("agent with-llm", "Downloading llm==0.19 and pip as wheels...")
        # Nothing more is printed: the row's time still goes by, written by the ticker.
        deadline = time.monotonic() + 10
        while row(sessions, job.id)["agent with-llm"]["elapsed_s"] < 2:
            assert time.monotonic() < deadline, row(sessions, job.id)
            time.sleep(0.1)
    told = row(sessions, job.id)["agent with-llm"]
    assert (told["state"], told["step"]) == (
        "building",
        "Downloading llm==0.19 and pip as wheels...",
    )
    progress.end("agent with-llm", built=True)
    assert row(sessions, job.id)["agent with-llm"]["state"] == "built"
