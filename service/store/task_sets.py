"""Named, versioned task sets: an owner's `NAME@VERSION` for a stored tree, and the teams an
admin shared a set with.

A version is immutable: pushing it again with the same bytes changes nothing, with other
bytes is refused. `NAME` alone is the newest version pushed. A team reads its own sets and
those shared with it; an admin, who sees every team's jobs, reads any. Owners are shown by
their team's name (or `admin`), never by id, and a set no caller may read answers as one
that does not exist, so that nothing tells a team what another has pushed.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from service.domain.task_sets import SetRef
from service.store.clock import now
from service.store.models import SuiteSet, SuiteSetShare, Team
from service.store.suites import ADMIN_OWNER, upsert_insert


class TaskSetError(Exception):
    """A set reference that names nothing the caller may read, or names it ambiguously."""


class VersionTaken(TaskSetError):
    """A push of a version already pushed with other bytes."""


@dataclass(frozen=True)
class SetVersion:
    owner: str  # the owner's id (a team's, or ADMIN_OWNER)
    owner_name: str  # as shown: the team's name, or ADMIN_OWNER
    name: str
    version: str
    sha256: str
    pushed_at: datetime

    def display(self, caller_owner: str) -> str:
        """The name a job keeps: `NAME@VERSION`, after `OWNER/` when it is another's."""
        owner = None if self.owner == caller_owner else self.owner_name
        return str(SetRef(self.name, self.version, owner))


@dataclass(frozen=True)
class Caller:
    owner: str  # owner_of(team_id) (service/store/suites.py)
    team_id: str | None
    admin: bool


def push(session: Session, owner: str, name: str, version: str, sha256: str) -> bool:
    """Record `name@version` as `owner`'s name for the stored tree `sha256`; whether it is new
    (False: pushed before with these bytes). VersionTaken when it names other bytes."""
    # ON CONFLICT, not a read then an insert: two pushes of one version at once insert one
    # row, and the other is answered by it (RETURNING: rowcount is -1 on PostgreSQL).
    insert = upsert_insert(session, SuiteSet)
    inserted = session.execute(
        insert.values(owner=owner, name=name, version=version, sha256=sha256, created_at=now())
        .on_conflict_do_nothing(index_elements=["owner", "name", "version"])
        .returning(SuiteSet.owner)
    ).first()
    if inserted is not None:
        return True
    row = session.get(SuiteSet, (owner, name, version), populate_existing=True)
    assert row is not None, f"{name}@{version} neither inserted nor found"
    if row.sha256 != sha256:
        raise VersionTaken(
            f"{name}@{version} is already pushed with other contents (sha256:{row.sha256}); "
            "a version never changes: push these as a new version."
        )
    return False


def _owner_names(session: Session, owners: set[str]) -> dict[str, str]:
    teams = session.scalars(select(Team).where(Team.id.in_(owners))).all()
    names = {team.id: team.name for team in teams}
    return {owner: names.get(owner, ADMIN_OWNER) for owner in owners}


def _owner_id(session: Session, shown: str) -> str | None:
    """The owner a display name stands for: a team, else the admins."""
    team = session.scalars(select(Team).where(Team.name == shown)).first()
    if team is not None:
        return team.id
    return ADMIN_OWNER if shown == ADMIN_OWNER else None


def _shared_with(session: Session, team_id: str | None) -> set[tuple[str, str]]:
    if team_id is None:
        return set()
    rows = session.execute(
        select(SuiteSetShare.owner, SuiteSetShare.name).where(SuiteSetShare.team_id == team_id)
    ).all()
    return {(owner, name) for owner, name in rows}


def _versions(session: Session, keys: set[tuple[str, str]]) -> list[SetVersion]:
    """Every version of the sets `keys` (owner, name), oldest push first."""
    if not keys:
        return []
    rows = session.scalars(
        select(SuiteSet)
        .where(SuiteSet.owner.in_({owner for owner, _ in keys}))
        .order_by(SuiteSet.created_at, SuiteSet.version)
    ).all()
    rows = [row for row in rows if (row.owner, row.name) in keys]
    names = _owner_names(session, {row.owner for row in rows})
    return [
        SetVersion(row.owner, names[row.owner], row.name, row.version, row.sha256, row.created_at)
        for row in rows
    ]


def readable(session: Session, caller: Caller) -> list[SetVersion]:
    """Every version of every set the caller may read: its own, those shared with its team,
    and for an admin all of them; by owner and name, oldest push first within a set."""
    if caller.admin:
        keys = {(row.owner, row.name) for row in session.scalars(select(SuiteSet)).all()}
    else:
        own = session.execute(
            select(SuiteSet.owner, SuiteSet.name).where(SuiteSet.owner == caller.owner)
        ).all()
        keys = {(owner, name) for owner, name in own} | _shared_with(session, caller.team_id)
    found = _versions(session, keys)
    return sorted(found, key=lambda v: (v.owner != caller.owner, v.owner_name, v.name))


def find(session: Session, ref: SetRef, caller: Caller) -> SetVersion | None:
    """The version `ref` names among the sets the caller may read; None when no such set is
    readable (the caller is told as for one no one pushed). TaskSetError when the set is
    there but the version is not, or when `NAME` alone names sets of several owners."""
    sets = [v for v in readable(session, caller) if v.name == ref.name]
    if ref.owner is not None:
        owner = _owner_id(session, ref.owner)
        sets = [v for v in sets if v.owner == owner]
    elif any(v.owner == caller.owner for v in sets):
        sets = [v for v in sets if v.owner == caller.owner]
    if not sets:
        return None
    if len({v.owner for v in sets}) > 1:
        owners = sorted({v.owner_name for v in sets})
        choices = ", ".join(f"{owner}/{ref.name}" for owner in owners)
        raise TaskSetError(
            f"Task set {ref.name!r} is shared with you by several owners; name one: {choices}."
        )
    if ref.version is None:
        return sets[-1]
    for version in sets:
        if version.version == ref.version:
            return version
    pushed = ", ".join(v.version for v in sets)
    raise TaskSetError(
        f"Task set {ref.name!r} has no version {ref.version!r}; it has {pushed}. Push one with "
        f"`examhall suites push {ref.name}@{ref.version} DIR`."
    )


def share(session: Session, owner: str, name: str, team_id: str) -> bool:
    """Share `owner`'s set `name` (every version) with a team; whether it was not already."""
    pushed = select(SuiteSet).where(SuiteSet.owner == owner, SuiteSet.name == name)
    if session.scalars(pushed).first() is None:
        raise TaskSetError(f"No task set {name!r} is pushed by that owner; nothing to share.")
    if session.get(SuiteSetShare, (owner, name, team_id)) is not None:
        return False
    session.add(SuiteSetShare(owner=owner, name=name, team_id=team_id, created_at=now()))
    session.flush()
    return True


def unshare(session: Session, owner: str, name: str, team_id: str) -> bool:
    """Stop sharing a set with a team (jobs it ran keep their suite); whether it was shared."""
    row = session.get(SuiteSetShare, (owner, name, team_id))
    if row is None:
        return False
    session.delete(row)
    return True


def shares(session: Session, owner: str, name: str) -> list[str]:
    """The names of the teams `owner`'s set `name` is shared with."""
    return list(
        session.scalars(
            select(Team.name)
            .join(SuiteSetShare, SuiteSetShare.team_id == Team.id)
            .where(SuiteSetShare.owner == owner, SuiteSetShare.name == name)
            .order_by(Team.name)
        )
    )


def owner_named(session: Session, shown: str) -> str:
    """The owner id a display name (a team's name, or `admin`) stands for."""
    owner = _owner_id(session, shown)
    if owner is None:
        raise TaskSetError(f"No team is named {shown!r}; `examhall admin teams` lists them.")
    return owner
