"""Uploaded suite trees: their bytes in the suites table, once; who uploaded them, per owner.

A tree's row has its format's kind ('harbor'; service/suites/registry.py), the archive's
bytes as uploaded, and the sha256 of those bytes (without the `sha256:` prefix the API
shows) as its key, as a Python suite's row has the sha256 of its source. Its name there is
only the first upload's, and is shown to no one: a team sees a tree only through its own row
of suite_uploads, under the name it gave it, so that nothing it is told depends on another
team's uploads (the bytes being stored already, or what another team called them). Admins,
who see every team's jobs, are one owner, and may also read any stored tree.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from service.store.clock import now
from service.store.models import Base, Suite, SuiteUpload
from service.suites.archives import ID_PREFIX, is_archive_id

# The owner of admin tokens' uploads: never a team's id (those start with "team-").
ADMIN_OWNER = "admin"


def owner_of(team_id: str | None) -> str:
    """The owner of a caller's uploads: its team, or ADMIN_OWNER for an admin token."""
    return team_id if team_id is not None else ADMIN_OWNER


@dataclass(frozen=True)
class SavedTree:
    suite: Suite
    name: str  # the owner's name for the tree: its first upload's
    created: bool  # False: this owner uploaded these bytes before


def upsert_insert(session: Session, table: type[Base]) -> Any:
    """The dialect's INSERT of `table`, which has ON CONFLICT (the core INSERT has not)."""
    dialect = session.get_bind().dialect.name
    return (postgresql.insert if dialect == "postgresql" else sqlite.insert)(table)


def store_tree(session: Session, *, suite_id: str, name: str, kind: str, data: bytes) -> Suite:
    """The suite row of an archive, inserted unless the same bytes are stored already; two
    uploads of the same bytes at once insert one row (the other finds it).

    Bytes stored already are written again (the same bytes, the row's name kept), so that an
    upload costs about what it would have cost had no one stored them first: the time of the
    answer does not say either."""
    sha = suite_id.removeprefix(ID_PREFIX)
    insert = upsert_insert(session, Suite).values(
        sha256=sha, name=name, source="", kind=kind, archive=data, created_at=now()
    )
    session.execute(
        insert.on_conflict_do_update(
            index_elements=["sha256"], set_={"archive": insert.excluded.archive}
        )
    )
    suite = session.get(Suite, sha)
    assert suite is not None, f"suite {sha} neither inserted nor found"
    return suite


def save_upload(
    session: Session, *, owner: str, suite_id: str, name: str, kind: str, data: bytes
) -> SavedTree:
    """An owner's upload of an archive: its bytes stored (store_tree) and the owner's record
    of it, new unless this owner uploaded these bytes before (its first name then stays)."""
    suite = store_tree(session, suite_id=suite_id, name=name, kind=kind, data=data)
    # RETURNING, not rowcount: an ORM-enabled INSERT reports a rowcount of -1 on PostgreSQL.
    inserted = session.execute(
        upsert_insert(session, SuiteUpload)
        .values(owner=owner, sha256=suite.sha256, name=name, created_at=now())
        .on_conflict_do_nothing(index_elements=["owner", "sha256"])
        .returning(SuiteUpload.owner)
    ).first()
    created = inserted is not None
    upload = session.get(SuiteUpload, (owner, suite.sha256))
    assert upload is not None, f"upload of {suite.sha256} by {owner} neither inserted nor found"
    return SavedTree(suite, upload.name, created)


def get_suite_tree(session: Session, suite_id: str) -> Suite | None:
    """The stored tree `sha256:<hex>`, whoever uploaded it, or None (also for a row with no
    archive: a Python suite's; which formats are trees is service/suite_resolver.py's to
    ask). Not for answering a team: see uploaded_tree."""
    if not is_archive_id(suite_id):
        return None
    suite = session.get(Suite, suite_id.removeprefix(ID_PREFIX))
    if suite is None or suite.archive is None:
        return None
    return suite


def uploaded_tree(
    session: Session, suite_id: str, owner: str, *, any_owner: bool = False
) -> tuple[Suite, str] | None:
    """The stored tree `sha256:<hex>` and `owner`'s name for it, or None when `owner` never
    uploaded it. With any_owner (an admin's read), any stored tree, under the owner's own
    name for it when there is one, else its first upload's."""
    suite = get_suite_tree(session, suite_id)
    if suite is None:
        return None
    upload = session.get(SuiteUpload, (owner, suite.sha256))
    if upload is not None:
        return suite, upload.name
    return (suite, suite.name) if any_owner else None
