"""Uploaded suite trees in the suites table: content-addressed, kept once, shared.

A tree's row has kind 'harbor', the archive's bytes as uploaded, and the sha256 of those
bytes (without the `sha256:` prefix the API shows) as its key, as a Python suite's row has
the sha256 of its source. Uploading the same bytes again finds the same row: the name of
the first upload stays.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from service.archives import ID_PREFIX, is_archive_id
from service.store.clock import now
from service.store.models import Suite


@dataclass(frozen=True)
class SavedTree:
    suite: Suite
    created: bool  # False: these bytes were stored before


def save_suite_tree(
    session: Session, *, suite_id: str, name: str, kind: str, data: bytes
) -> SavedTree:
    """The suite row of an archive, inserted unless the same bytes are stored already; two
    uploads of the same bytes at once insert one row (the other finds it)."""
    sha = suite_id.removeprefix(ID_PREFIX)
    values = {
        "sha256": sha,
        "name": name,
        "source": "",
        "kind": kind,
        "archive": data,
        "created_at": now(),
    }
    dialect = session.get_bind().dialect.name
    insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
    result = session.execute(
        insert(Suite).values(**values).on_conflict_do_nothing(index_elements=["sha256"])
    )
    created = result.rowcount == 1  # type: ignore[attr-defined]
    suite = session.get(Suite, sha)
    assert suite is not None, f"suite {sha} neither inserted nor found"
    return SavedTree(suite, created)


def get_suite_tree(session: Session, suite_id: str) -> Suite | None:
    """The stored tree `sha256:<hex>`, or None (also for a Python suite's row: those are
    reached through their jobs, not by id)."""
    if not is_archive_id(suite_id):
        return None
    suite = session.get(Suite, suite_id.removeprefix(ID_PREFIX))
    if suite is None or suite.archive is None or suite.kind == "python":
        return None
    return suite
