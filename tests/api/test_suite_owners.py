"""Uploaded suites are stored once by their bytes but owned per team: over real HTTP, what a
team is told about a suite (the upload's status and body, a read by id, a job naming it)
depends only on its own uploads, never on whether another team uploaded the same bytes, and
never shows another team's name for them."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa

from service.store.db import make_engine, session_factory
from service.store.models import Suite
from service.suite_resolver import resolve_tasks, uploaded_tasks
from service.suites import SuiteError
from service.suites.archives import archive_id, pack_directory
from service.suites.harbor import HARBOR
from tests.api.test_suites import GZIP, harbor_tree
from tests.docker.conftest import Server


def _rows(server: Server, query: str) -> list[tuple[object, ...]]:
    engine = sa.create_engine(server.database_url)
    with engine.connect() as connection:
        rows = [tuple(row) for row in connection.execute(sa.text(query)).all()]
    engine.dispose()
    return rows


def _upload(client: httpx.Client, name: str, data: bytes) -> tuple[int, dict[str, object]]:
    response = client.post("/v1/suites", params={"name": name}, content=data, headers=GZIP)
    return response.status_code, response.json()


def test_a_re_upload_answers_each_team_by_its_own_uploads(server: Server, tmp_path: Path) -> None:
    blue = server.as_team(server.team_token("blue"))
    red = server.as_team(server.team_token("red"))
    green = server.as_team(server.team_token("green"))
    taken = pack_directory(harbor_tree(tmp_path / "taken"))
    fresh = pack_directory(harbor_tree(tmp_path / "fresh", tasks=("other",)))

    assert _upload(blue, "blue-secret-plan", taken)[0] == 201
    # Red's first upload of bytes blue holds answers exactly as its upload of bytes no one
    # holds: 201, under red's own name.
    status, body = _upload(red, "red-name", taken)
    fresh_status, fresh_body = _upload(red, "fresh", fresh)
    assert (status, fresh_status) == (201, 201)
    assert body == {**body, "id": archive_id(taken), "name": "red-name", "kind": "harbor"}
    assert body.keys() == fresh_body.keys()
    # Again: 200 under red's first name (whatever it is called now), as for any re-upload.
    status, again = _upload(red, "renamed", taken)
    assert status == 200 and again == body
    assert _upload(red, "renamed", fresh) == (200, fresh_body)

    # Reads by id: each team sees its own name; a team that never uploaded the bytes gets
    # the 404 of bytes no one stored.
    assert red.get(f"/v1/suites/{archive_id(taken)}").json()["name"] == "red-name"
    assert blue.get(f"/v1/suites/{archive_id(taken)}").json()["name"] == "blue-secret-plan"
    held = green.get(f"/v1/suites/{archive_id(taken)}")
    unknown_id = "sha256:" + "0" * 64
    unheld = green.get(f"/v1/suites/{unknown_id}")
    assert held.status_code == unheld.status_code == 404
    assert held.json()["detail"].replace(archive_id(taken), unknown_id) == unheld.json()["detail"]
    # An admin, who sees every team's jobs, reads any stored suite.
    assert server.http.get(f"/v1/suites/{archive_id(taken)}").status_code == 200

    for client in (red, green):
        for path in (f"/v1/suites/{archive_id(taken)}", f"/v1/suites/{archive_id(fresh)}"):
            assert "blue-secret-plan" not in client.get(path).text
    # The bytes are stored once; each team's upload is its own.
    sha = archive_id(taken).removeprefix("sha256:")
    assert _rows(server, f"SELECT count(*) FROM suites WHERE sha256 = '{sha}'") == [(1,)]
    owners = _rows(
        server,
        "SELECT t.name, u.name FROM suite_uploads u JOIN teams t ON t.id = u.owner "
        f"WHERE u.sha256 = '{sha}' ORDER BY t.name",
    )
    assert owners == [("blue", "blue-secret-plan"), ("red", "red-name")]
    for client in (blue, red, green):
        client.close()


def test_a_job_finds_only_the_callers_own_uploads_under_its_name(
    server: Server, tmp_path: Path
) -> None:
    """suite_resolver.resolve_tasks, which POST /v1/jobs calls for a task suite (a backend
    that builds images is needed to reach it over HTTP), on the server's real store."""
    blue = server.as_team(server.team_token("blue"))
    red = server.as_team(server.team_token("red"))
    data = pack_directory(harbor_tree(tmp_path / "suite"))
    assert _upload(blue, "blue-secret-plan", data)[0] == 201
    suite_id, unknown_id = archive_id(data), "sha256:" + "0" * 64
    teams = dict(_rows(server, "SELECT name, id FROM teams"))
    engine = make_engine(server.database_url)
    try:
        sessions = session_factory(engine)
        with sessions.begin() as session:
            found = resolve_tasks(session, suite_id, HARBOR, team_id=teams["blue"], admin=False)
            assert found.name == "blue-secret-plan"
            # Red never uploaded it: refused as bytes no one stored are.
            with pytest.raises(SuiteError) as held:
                resolve_tasks(session, suite_id, HARBOR, team_id=teams["red"], admin=False)
            with pytest.raises(SuiteError) as unheld:
                resolve_tasks(session, unknown_id, HARBOR, team_id=teams["red"], admin=False)
            assert str(held.value).replace(suite_id, "X") == str(unheld.value).replace(
                unknown_id, "X"
            )
            # An admin finds any stored suite.
            assert resolve_tasks(session, suite_id, HARBOR, team_id=None, admin=True).id == suite_id
        assert _upload(red, "red-name", data)[0] == 201
        with sessions.begin() as session:
            suite = resolve_tasks(session, suite_id, HARBOR, team_id=teams["red"], admin=False)
            assert suite.name == "red-name"
            # The parsed suite is cached by its bytes, but always named as asked (the
            # scheduler asks by the job's suite_name).
            row = session.get(Suite, suite.sha256)
            assert row is not None
            assert uploaded_tasks(row, "blue-secret-plan").name == "blue-secret-plan"
            assert uploaded_tasks(row, "red-name").name == "red-name"
            with pytest.raises(SuiteError, match="red-name has no task 'nope'"):
                uploaded_tasks(row, "red-name").task("nope")
    finally:
        engine.dispose()
    for client in (blue, red):
        client.close()
