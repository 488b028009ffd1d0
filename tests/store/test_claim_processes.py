"""Two real processes claim from one database at once: no trial is handed to both."""

from __future__ import annotations

import collections
import subprocess
import sys
import time
from pathlib import Path

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from service.store import counts
from service.store.models import Trial
from tests.store.conftest import submit

CLAIMERS = 2


def test_two_processes_never_claim_one_trial_twice(
    database_url: str, sessions: sessionmaker[Session], tmp_path: Path
) -> None:
    for _ in range(2):
        submit(sessions, rounds=15)  # 120 trials in all
    go = tmp_path / "go"
    processes = [
        subprocess.Popen(
            [sys.executable, "-m", "tests.store.claimer", database_url, f"claimer-{n}", str(go)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in range(CLAIMERS)
    ]
    try:
        deadline = time.monotonic() + 120
        while not all(Path(f"{go}.claimer-{n}.ready").exists() for n in range(CLAIMERS)):
            assert time.monotonic() < deadline, "the claimers did not start"
            for process in processes:
                assert process.poll() is None, process.communicate()[1][-3000:]
            time.sleep(0.01)
        go.touch()
        outputs = [process.communicate(timeout=240) for process in processes]
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.wait()
    for process, (_, err) in zip(processes, outputs, strict=True):
        assert process.returncode == 0, err[-3000:]
    claims = [out.split() for out, _ in outputs]
    counted = collections.Counter(trial for ids in claims for trial in ids)
    assert [t for t, n in counted.items() if n > 1] == []
    with sessions() as session:
        trials = session.scalars(select(Trial)).all()
        assert {t.id for t in trials} == set(counted)
        assert {(t.status, t.attempt) for t in trials} == {("finished", 1)}
        # Each trial's row names the process that claimed it.
        owners = {trial: f"claimer-{n}" for n, ids in enumerate(claims) for trial in ids}
        assert {t.id: t.owner for t in trials} == owners
        # Each job's counts, kept by both processes' claims and results, are what counting
        # its trials gives.
        for job_id in {t.job_id for t in trials}:
            kept = counts.read(session, job_id)
            assert kept is not None
            assert kept.as_dict() == counts.count_trials(session, job_id)
            assert (kept.finished, kept.queued, kept.running) == (60, 0, 0)
    # Both took part, or the test proved nothing about two claimers.
    assert all(claims), [len(ids) for ids in claims]
