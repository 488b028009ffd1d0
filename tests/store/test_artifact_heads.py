"""What the trial page reads of a trial's artifacts to tell text from binary: each one's
name, size and first bytes, cut by the database (SQLite's substr on a BLOB, PostgreSQL's on a
bytea) without the rest crossing over; and the verdicts the page draws from them."""

from __future__ import annotations

import hashlib

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from service.store.models import Artifact, Trial
from service.store.trials import artifact_heads
from service.web.artifact_text import HEAD_BYTES, VIEW_MAX_BYTES, artifact_facts
from tests.store.conftest import submit

TEXT = b"a" + "é".encode() * (HEAD_BYTES // 2)  # a two-byte character across the cut
ARTIFACTS = {
    "notes.txt": TEXT,
    "blob.bin": b"\x89PNG\r\n\x1a\n\x00" + bytes(range(256)),
    "big.log": b"x" * (VIEW_MAX_BYTES + 1),
    "empty.log": b"",
}


def test_heads_are_cut_by_the_database_and_tell_text_from_binary(
    sessions: sessionmaker[Session],
) -> None:
    job = submit(sessions, cases=["create-greeting"])
    with sessions.begin() as session:
        trial = session.scalars(select(Trial.id).where(Trial.job_id == job.id)).one()
        for name, content in ARTIFACTS.items():
            digest = hashlib.sha256(content).hexdigest()
            row = Artifact(trial_id=trial, name=name, sha256=digest, size=len(content))
            row.content = content
            session.add(row)
    with sessions() as session:
        heads = {name: (size, head) for name, size, head in artifact_heads(session, trial, 16)}
        facts = artifact_facts(session, trial)
    assert heads == {name: (len(data), data[:16]) for name, data in ARTIFACTS.items()}
    assert facts == {
        "notes.txt": (len(TEXT), None),  # the cut character does not make it binary
        "blob.bin": (len(ARTIFACTS["blob.bin"]), "binary"),
        "big.log": (VIEW_MAX_BYTES + 1, "too large to view"),
        "empty.log": (0, None),
    }
