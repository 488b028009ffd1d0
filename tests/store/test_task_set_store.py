"""Named, versioned task sets on SQLite and PostgreSQL (service/store/task_sets.py): a version
never changes, `NAME` is the newest push, and a team reads its own sets and those an admin
shared with it, never another's, which it is told about as about a set no one pushed."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from service.domain.task_sets import SetRef
from service.store import task_sets
from service.store.models import SuiteSet
from service.store.suites import ADMIN_OWNER, store_tree
from service.store.teams import add_team
from service.suites.archives import archive_id


def _tree(session: Session, data: bytes) -> str:
    return store_tree(session, suite_id=archive_id(data), name="t", kind="harbor", data=data).sha256


def _teams(sessions: sessionmaker[Session], *names: str) -> dict[str, str]:
    with sessions.begin() as session:
        return {name: add_team(session, name, None).id for name in names}


def _find(
    sessions: sessionmaker[Session], ref: str, team_id: str | None, admin: bool = False
) -> tuple[str, str] | None:
    parsed = SetRef.parse(ref)
    assert parsed is not None
    caller = task_sets.Caller(team_id or ADMIN_OWNER, team_id, admin)
    with sessions() as session:
        found = task_sets.find(session, parsed, caller)
    return None if found is None else (found.display(caller.owner), found.sha256)


def test_a_version_never_changes_and_the_name_alone_is_the_newest(
    sessions: sessionmaker[Session],
) -> None:
    blue = _teams(sessions, "blue")["blue"]
    with sessions.begin() as session:
        first, second = _tree(session, b"one"), _tree(session, b"two")
        assert task_sets.push(session, blue, "tasks", "1.0", first)
        assert task_sets.push(session, blue, "tasks", "2.0+rc", second)
        # The same bytes again: nothing new.
        assert not task_sets.push(session, blue, "tasks", "1.0", first)
    taken = pytest.raises(task_sets.VersionTaken, match=r"tasks@1.0 is already pushed")
    with taken, sessions.begin() as session:
        task_sets.push(session, blue, "tasks", "1.0", second)
    with sessions() as session:
        assert session.scalar(select(func.count()).select_from(SuiteSet)) == 2
        assert session.get(SuiteSet, (blue, "tasks", "1.0")).sha256 == first  # type: ignore[union-attr]

    assert _find(sessions, "tasks", blue) == ("tasks@2.0+rc", second)
    assert _find(sessions, "tasks@1.0", blue) == ("tasks@1.0", first)
    with pytest.raises(task_sets.TaskSetError, match=r"no version '3.0'; it has 1.0, 2.0\+rc"):
        _find(sessions, "tasks@3.0", blue)


def test_a_team_reads_its_own_sets_and_those_shared_with_it(
    sessions: sessionmaker[Session],
) -> None:
    teams = _teams(sessions, "blue", "red", "green")
    blue, red, green = teams["blue"], teams["red"], teams["green"]
    with sessions.begin() as session:
        sha = _tree(session, b"blue's")
        task_sets.push(session, blue, "tasks", "1.0", sha)

    # Another team is told what it is told of a set no one pushed.
    assert _find(sessions, "tasks@1.0", red) is None
    assert _find(sessions, "blue/tasks@1.0", red) is None
    assert _find(sessions, "nothing", red) is None
    # An admin reads any, under its owner's name.
    assert _find(sessions, "tasks", None, admin=True) == ("blue/tasks@1.0", sha)

    with sessions.begin() as session:
        assert task_sets.share(session, blue, "tasks", red)
        assert not task_sets.share(session, blue, "tasks", red)
        assert task_sets.shares(session, blue, "tasks") == ["red"]
        with pytest.raises(task_sets.TaskSetError, match="No task set 'other'"):
            task_sets.share(session, blue, "other", red)
    assert _find(sessions, "tasks@1.0", red) == ("blue/tasks@1.0", sha)
    assert _find(sessions, "blue/tasks", red) == ("blue/tasks@1.0", sha)
    assert _find(sessions, "tasks", green) is None

    # A set of red's own of the same name comes first; two shared ones are named by owner.
    with sessions.begin() as session:
        own = _tree(session, b"red's")
        task_sets.push(session, red, "tasks", "0.1", own)
        task_sets.push(session, green, "tasks", "9", own)
        task_sets.share(session, green, "tasks", blue)
    assert _find(sessions, "tasks", red) == ("tasks@0.1", own)
    assert _find(sessions, "blue/tasks", red) == ("blue/tasks@1.0", sha)
    # A team that two owners shared a set of one name with names the one it means.
    white = _teams(sessions, "white")["white"]
    with sessions.begin() as session:
        assert not task_sets.unshare(session, blue, "tasks", white)  # was never shared
        task_sets.share(session, blue, "tasks", white)
        task_sets.share(session, green, "tasks", white)
    with pytest.raises(task_sets.TaskSetError, match="several owners; name one: blue/tasks, green"):
        _find(sessions, "tasks", white)
    assert _find(sessions, "green/tasks", white) == ("green/tasks@9", own)


def test_listing_shows_own_sets_first_and_a_revoked_share_is_gone(
    sessions: sessionmaker[Session],
) -> None:
    teams = _teams(sessions, "blue", "red")
    blue, red = teams["blue"], teams["red"]
    with sessions.begin() as session:
        sha = _tree(session, b"x")
        task_sets.push(session, blue, "b-set", "1", sha)
        task_sets.push(session, red, "r-set", "1", sha)
        task_sets.push(session, red, "r-set", "2", sha)
        task_sets.share(session, blue, "b-set", red)
    with sessions() as session:
        listed = task_sets.readable(session, task_sets.Caller(red, red, False))
        assert [(v.owner_name, v.name, v.version) for v in listed] == [
            ("red", "r-set", "1"),
            ("red", "r-set", "2"),
            ("blue", "b-set", "1"),
        ]
        everything = task_sets.readable(session, task_sets.Caller(ADMIN_OWNER, None, True))
        assert len(everything) == 3
    with sessions.begin() as session:
        assert task_sets.unshare(session, blue, "b-set", red)
    with sessions() as session:
        listed = task_sets.readable(session, task_sets.Caller(red, red, False))
        assert {v.name for v in listed} == {"r-set"}


def test_two_pushes_of_one_version_at_once_store_one_and_answer_both(
    sessions: sessionmaker[Session],
) -> None:
    """Each push's session has not seen the other's row when it inserts: the conflict is
    the store's to settle, never a 500."""
    blue = _teams(sessions, "blue")["blue"]
    with sessions.begin() as session:
        sha, other = _tree(session, b"same"), _tree(session, b"other")
    first, second = sessions(), sessions()
    try:
        first.begin()
        second.begin()
        assert task_sets.push(first, blue, "tasks", "1.0", sha)
        first.commit()
        assert not task_sets.push(second, blue, "tasks", "1.0", sha)
        with pytest.raises(task_sets.VersionTaken):
            task_sets.push(second, blue, "tasks", "1.0", other)
    finally:
        first.close()
        second.close()
