"""The client half of `examhall submit DIR`: the directory is packed, uploaded to
POST /v1/suites, and the job names the suite by its id. (Resolving a `sha256:` suite into
the job's cases is the job side's, and not what these tests check.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from examhall import Client, suite_name
from service.cli import main
from service.suites.archives import archive_id, pack_directory
from tests.api.test_suites import harbor_tree
from tests.docker.conftest import Server


def test_upload_suite_packs_the_directory_and_answers_its_id(
    server: Server, tmp_path: Path
) -> None:
    tree = harbor_tree(tmp_path / "my suite")
    client = Client(server.url, server.token)
    try:
        suite_id = client.upload(tree).id
        assert suite_id == archive_id(pack_directory(tree))
        # Unchanged, the tree uploads to the same suite; changed, to another.
        assert client.upload(tree).id == suite_id
        (tree / "hello" / "instruction.md").write_text("Do it differently.\n")
        assert client.upload(tree).id != suite_id
    finally:
        client.close()
    shown = server.http.get(f"/v1/suites/{suite_id}").json()
    assert shown["name"] == "my-suite" == suite_name(tree)
    assert shown["kind"] == "harbor" and shown["files"] == 8


def test_submit_of_a_directory_uploads_it_first(
    server: Server, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tree = harbor_tree(tmp_path / "demo")
    argv = ["submit", str(tree), "--server", server.url, "--token", server.token]
    main([*argv, "--model", "faux/solution", "--detach"])
    suite_id = archive_id(pack_directory(tree))
    assert f"Uploaded {tree} as suite {suite_id}." in capsys.readouterr().err
    assert server.http.get(f"/v1/suites/{suite_id}").json()["name"] == "demo"


def test_submit_of_a_directory_that_cannot_be_packed_says_why(
    server: Server, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tree = harbor_tree(tmp_path / "leaky")
    (tmp_path / "secret").write_text("no")
    (tree / "hello" / "key").symlink_to(tmp_path / "secret")
    code = main(["submit", str(tree), "--server", server.url, "--token", server.token])
    assert code == 2
    err = capsys.readouterr().err
    assert "examhall: Archive entry 'hello/key': is a symbolic link" in err
    assert "outside the directory" in err


def test_submit_of_a_directory_names_the_tasks_the_upload_left_out(
    server: Server, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tree = harbor_tree(tmp_path / "half")
    (tree / "hello" / "instruction.md").unlink()
    argv = ["submit", str(tree), "--server", server.url, "--token", server.token]
    main([*argv, "--model", "faux/solution", "--detach"])
    err = capsys.readouterr().err
    assert f"Uploaded {tree} as suite {archive_id(pack_directory(tree))}." in err
    left_out = err.split("Left out task hello, refused:\n", 1)[1].splitlines()[0]
    assert left_out.startswith("  task hello: ") and "instruction.md is missing" in left_out, err
    assert "task jq-count" not in err


def test_submit_sends_its_concurrency_and_prints_the_servers_refusal(
    server: Server, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["submit", "smoke", "--server", server.url, "--token", server.token]
    assert main([*argv, "--model", "simulated/coin", "--concurrency", "0", "--detach"]) == 2
    err = capsys.readouterr().err
    assert "concurrency" in err and "greater than or equal to 1" in err, err
    assert server.http.get("/v1/jobs").json() == []
