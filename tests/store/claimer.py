"""One claiming process for tests/store/test_claim_processes.py: the scheduler's real claim
against a shared database, pausing 10 ms between claims, until nothing is queued.

    python -m tests.store.claimer URL OWNER GO_FILE

Says it is ready in GO_FILE.OWNER.ready, waits for GO_FILE (so every process starts claiming
at once), prints one line per claimed trial id, finishes each trial through the scheduler,
and exits 0.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from sqlalchemy import func, select

from sandbox.protocol import TrialResult
from service.launch.trial import TrialRecord
from service.store.db import make_engine, session_factory
from service.store.models import Trial
from tests.store.conftest import make_scheduler


def main(url: str, owner: str, go_file: str) -> int:
    engine = make_engine(url)
    sessions = session_factory(engine)
    scheduler = make_scheduler(sessions, owner)
    go = Path(go_file)
    Path(f"{go_file}.{owner}.ready").touch()
    while not go.exists():
        time.sleep(0.005)
    while True:
        claimed = [trial_id for trial_id, _ in scheduler.claim(3)]
        for trial_id in claimed:
            print(trial_id, flush=True)
        for trial_id in claimed:
            scheduler.record(trial_id, TrialRecord(trial_id, TrialResult("passed", score=1.0)))
        # A real scheduler runs its trials between claims. Without any pause, SQLite's busy
        # handler (which sleeps the waiting process while this one commits again) can starve
        # the other claimer for the whole run: CI once saw 0 claims against 120.
        time.sleep(0.01)
        if not claimed:
            with sessions() as session:
                queued = session.scalar(
                    select(func.count()).select_from(Trial).where(Trial.status == "queued")
                )
            if not queued:
                break
    scheduler.stop()
    engine.dispose()
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
