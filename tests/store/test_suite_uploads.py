"""Suite uploads on SQLite and PostgreSQL: a tree's bytes are stored once, each owner's
upload is its own, and nothing an owner reads back depends on another's upload."""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from service.store.models import Suite, SuiteUpload
from service.store.suites import ADMIN_OWNER, owner_of, save_upload, store_tree, uploaded_tree
from service.suites.archives import archive_id


def test_each_owner_has_its_own_upload_of_shared_bytes(sessions: sessionmaker[Session]) -> None:
    data = b"the archive's bytes"
    suite_id = archive_id(data)

    def upload(owner: str, name: str) -> tuple[str, bool]:
        with sessions.begin() as session:
            saved = save_upload(
                session, owner=owner, suite_id=suite_id, name=name, kind="harbor", data=data
            )
            assert saved.suite.archive == data
            return saved.name, saved.created

    assert upload("team-blue", "blue-secret") == ("blue-secret", True)
    # Another owner's first upload of the same bytes is new to it, under its own name.
    assert upload("team-red", "red") == ("red", True)
    assert upload("team-red", "renamed") == ("red", False)
    assert upload(owner_of(None), "admins") == ("admins", True)
    with sessions() as session:
        assert session.scalar(select(func.count()).select_from(Suite)) == 1
        assert session.scalar(select(func.count()).select_from(SuiteUpload)) == 3
        found = uploaded_tree(session, suite_id, "team-red")
        assert found is not None and found[1] == "red"
        assert uploaded_tree(session, suite_id, "team-green") is None
        # An admin reads any stored tree: its own name for it, else the first upload's.
        assert owner_of(None) == ADMIN_OWNER
        admin = uploaded_tree(session, suite_id, ADMIN_OWNER, any_owner=True)
        assert admin is not None and admin[1] == "admins"
        anyone = uploaded_tree(session, suite_id, "team-green", any_owner=True)
        assert anyone is not None and anyone[1] == "blue-secret"


def test_storing_known_bytes_again_keeps_the_row(sessions: sessionmaker[Session]) -> None:
    data = b"shipped"
    for name in ("harbor_demo", "another"):
        with sessions.begin() as session:
            suite = store_tree(
                session, suite_id=archive_id(data), name=name, kind="harbor", data=data
            )
            assert (suite.name, suite.archive) == ("harbor_demo", data)
    with sessions() as session:
        assert session.scalar(select(func.count()).select_from(SuiteUpload)) == 0
