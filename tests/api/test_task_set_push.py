"""Named, versioned task sets over real HTTP and the CLI: `examhall suites push NAME@VERSION
DIR` as a team, a job's suite resolved from `NAME@VERSION` and `NAME` (its newest), a version
that never changes (409, and nothing stored), and a set another team reads only once an admin
shares it (`examhall admin share-set`), under its owner's name."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa

from service.cli.main import main
from service.domain.planner import JobInputError
from service.store.db import make_engine, session_factory
from service.suite_resolver import format_for, resolve_tasks
from service.suites import SuiteError
from service.suites.archives import archive_id, pack_directory
from service.suites.harbor import HARBOR
from tests.api.test_suites import GZIP, harbor_tree
from tests.docker.conftest import Server


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _count(server: Server, table: str) -> int:
    engine = sa.create_engine(server.database_url)
    with engine.connect() as connection:
        count = connection.execute(sa.text(f"SELECT count(*) FROM {table}")).scalar_one()
    engine.dispose()
    return int(count)


def test_push_resolve_and_share_a_task_set(
    server: Server,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    blue_token, red_token = server.team_token("blue"), server.team_token("red")
    first = harbor_tree(tmp_path / "v1", tasks=("hello",))
    second = harbor_tree(tmp_path / "v2", tasks=("hello", "other"))
    blue = ("--server", server.url, "--token", blue_token)
    red = ("--server", server.url, "--token", red_token)

    code, out, err = _cli(capsys, "suites", "push", "tasks@1.0", str(first), *blue)
    assert code == 0, err
    assert out.strip() == archive_id(pack_directory(first))
    assert "Pushed tasks@1.0" in err and "examhall submit tasks@1.0" in err
    assert _cli(capsys, "suites", "push", "tasks@2.0", str(second), *blue)[0] == 0
    # The same version and bytes again: nothing new. Other bytes: refused, nothing stored.
    assert _cli(capsys, "suites", "push", "tasks@1.0", str(first), *blue)[0] == 0
    suites, uploads = _count(server, "suites"), _count(server, "suite_uploads")
    changed = harbor_tree(tmp_path / "changed", tasks=("changed",))
    code, _, err = _cli(capsys, "suites", "push", "tasks@1.0", str(changed), *blue)
    assert code == 2 and "HTTP 409" in err and "tasks@1.0 is already pushed" in err, err
    assert (_count(server, "suites"), _count(server, "suite_uploads")) == (suites, uploads)
    assert _count(server, "suite_sets") == 2
    # Not NAME@VERSION, or a shipped suite's name: said before anything is sent.
    code, _, err = _cli(capsys, "suites", "push", "tasks", str(first), *blue)
    assert code == 2 and "is not NAME@VERSION" in err
    shipped = server.as_team(blue_token).post(
        "/v1/suites",
        params={"name": "harbor_demo", "version": "1"},
        content=pack_directory(first),
        headers=GZIP,
    )
    assert shipped.status_code == 422 and "a suite this server ships" in shipped.text
    spaced = server.as_team(blue_token).post(
        "/v1/suites",
        params={"name": "tasks", "version": "1 0"},
        content=pack_directory(first),
        headers=GZIP,
    )
    assert spaced.status_code == 422 and "version '1 0' is not one" in spaced.text

    code, out, _ = _cli(capsys, "suites", "list", *blue)
    assert code == 0 and out.splitlines()[0] == "tasks  (owner blue)"
    assert [line.split()[0] for line in out.splitlines()[1:]] == ["@1.0", "@2.0"]
    assert _cli(capsys, "suites", "list", *red)[1].startswith("No task sets yet")

    engine = make_engine(server.database_url)
    try:
        sessions = session_factory(engine)
        with sessions() as session:
            ids = dict(session.execute(sa.text("SELECT name, id FROM teams")).all())

        def resolve(ref: str, team: str) -> tuple[str, str, list[str]]:
            assert format_for(sessions, ref, team_id=ids[team], admin=False) is HARBOR
            with sessions.begin() as session:
                found = resolve_tasks(session, ref, HARBOR, team_id=ids[team], admin=False)
            return found.name, found.id, sorted(found.tasks)

        assert resolve("tasks", "blue") == (
            "tasks@2.0",
            archive_id(pack_directory(second)),
            ["hello", "other"],
        )
        assert resolve("tasks@1.0", "blue")[:2] == ("tasks@1.0", archive_id(pack_directory(first)))
        with pytest.raises(JobInputError, match=r"no version '3'; it has 1.0, 2.0"):
            resolve("tasks@3", "blue")
        # Over HTTP, the same as a 422 naming the field, never a 500.
        blue_http = server.as_team(blue_token)
        missing = blue_http.post("/v1/jobs", json={"suite": "tasks@3"})
        blue_http.close()
        assert missing.status_code == 422, missing.text
        assert missing.json()["detail"][0]["loc"] == ["body", "suite"]
        assert "no version '3'; it has 1.0, 2.0" in missing.json()["detail"][0]["msg"]
        # Red cannot run blue's set, and is told as of a set no one pushed.
        red_http = server.as_team(red_token)
        answers = []
        for ref in ("tasks@1.0", "blue/tasks", "nothing@1"):
            with sessions.begin() as session, pytest.raises(SuiteError) as refused:
                resolve_tasks(session, ref, HARBOR, team_id=ids["red"], admin=False)
            assert "nor a task set you may read" in str(refused.value)
            answer = red_http.post("/v1/jobs", json={"suite": ref})
            assert answer.status_code == 422
            answers.append(answer.json()["detail"][0]["msg"].replace(repr(ref), "REF"))
        assert answers[0] == answers[1] == answers[2], answers
        assert "no task set you may read" in answers[0]

        monkeypatch.setenv("EXAMHALL_DATABASE_URL", server.database_url)
        code, out, err = _cli(capsys, "admin", "share-set", "blue/tasks", "red")
        assert code == 0 and "blue/tasks is now shared with red" in out, err
        code, _, err = _cli(capsys, "admin", "share-set", "blue/nothing", "red")
        assert code == 2 and "No task set 'nothing'" in err
        code, _, err = _cli(capsys, "admin", "share-set", "tasks@1.0", "red")
        assert code == 2 and "is not OWNER/NAME" in err

        assert resolve("tasks", "red")[0] == "blue/tasks@2.0"
        assert resolve("blue/tasks@1.0", "red")[0] == "blue/tasks@1.0"
        listed = _cli(capsys, "suites", "list", *red)[1]
        assert listed.splitlines()[0] == "blue/tasks  (owner blue)", listed
        # Its owner sees whom it is shared with; the team it is shared with does not.
        assert "shared with red" in _cli(capsys, "suites", "list", *blue)[1]

        assert _cli(capsys, "admin", "share-set", "blue/tasks", "red", "--revoke")[0] == 0
        with sessions.begin() as session, pytest.raises(SuiteError):
            resolve_tasks(session, "tasks", HARBOR, team_id=ids["red"], admin=False)
        red_http.close()
    finally:
        engine.dispose()
