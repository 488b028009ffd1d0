"""Which environment images trials used last and which they still need, as the image cache
(service/environments/cache.py) reads them from the store, on SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import select, update
from sqlalchemy.orm import Session, sessionmaker

from service.store import environments as builds
from service.store.models import EnvironmentBuild, Trial
from tests.store.conftest import submit


def test_last_use_is_the_latest_trial_or_build_and_queued_or_running_trials_are_needed(
    sessions: sessionmaker[Session],
) -> None:
    job = submit(sessions, cases=["create-greeting", "fix-config", "count-lines"])
    early, late, built_at = datetime(2026, 1, 1), datetime(2026, 2, 1), datetime(2026, 3, 1)
    with sessions.begin() as session:
        trials = list(session.scalars(select(Trial.id).where(Trial.job_id == job.id)))
        assert len(trials) == 3
        rows = [
            (trials[0], "examhall/env:aaaa", "finished", late),
            (trials[1], "examhall/env:bbbb", "finished", early),
            (trials[2], "examhall/env:cccc", "queued", None),
        ]
        for trial, image, status, finished in rows:
            session.execute(
                update(Trial)
                .where(Trial.id == trial)
                .values(image=image, status=status, finished_at=finished)
            )
        builds.started(session, "h1", "suite s, task a")
        builds.built(session, "h1", "examhall/env:bbbb", "sha256:1", "")
        builds.started(session, "h2", "suite s, task b")
        builds.built(session, "h2", "examhall/env:dddd", "sha256:2", "")
    with sessions.begin() as session:
        # The builds' times, fixed for the comparison.
        session.execute(update(EnvironmentBuild).values(finished_at=built_at))
    with sessions() as session:
        last, needed = builds.image_uses(session)
    assert last == {
        "examhall/env:aaaa": late,
        "examhall/env:bbbb": built_at,  # built after its last trial: the build counts
        "examhall/env:dddd": built_at,  # never used: its build is its last use
    }
    assert needed == {"examhall/env:cccc"}
