"""POST and GET /v1/suites over real HTTP: an uploaded tree is stored once by its content
address, and what is too large, hostile or no suite is refused with what and why."""

from __future__ import annotations

import gzip
import io
import os
import tarfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa

from service.backends.fake import FakeBackend
from service.settings import Settings
from service.suites.archives import DEFAULT_MAX_UNPACKED_BYTES, archive_id, pack_directory
from tests.api.conftest import _no_sandbox
from tests.docker.conftest import Server, serve

GZIP = {"content-type": "application/gzip"}


def harbor_tree(root: Path, tasks: tuple[str, ...] = ("hello", "jq-count")) -> Path:
    for task in tasks:
        (root / task / "tests").mkdir(parents=True)
        (root / task / "environment").mkdir()
        (root / task / "task.toml").write_text('version = "1.0"\n[verifier]\ntimeout_sec = 60\n')
        (root / task / "instruction.md").write_text(f"Do {task}.\n")
        (root / task / "environment" / "Dockerfile").write_text("FROM debian:bookworm\n")
        test = root / task / "tests" / "test.sh"
        test.write_text("#!/bin/sh\necho 1 > /logs/verifier/reward.txt\n")
        test.chmod(0o755)
    return root


def _suite_rows(server: Server) -> list[tuple[str, str, str]]:
    engine = sa.create_engine(server.database_url)
    with engine.connect() as connection:
        rows = connection.execute(sa.text("SELECT sha256, name, kind FROM suites")).all()
    engine.dispose()
    return [tuple(row) for row in rows]


def test_an_uploaded_tree_is_stored_once_by_its_content_address(
    server: Server, tmp_path: Path
) -> None:
    data = pack_directory(harbor_tree(tmp_path / "suite"))
    response = server.http.post("/v1/suites", params={"name": "demo"}, content=data, headers=GZIP)
    assert response.status_code == 201, response.text
    created = response.json()
    assert created == {
        "id": archive_id(data),
        "name": "demo",
        "kind": "harbor",
        "files": 8,
        "bytes": len(data),
        "tasks": ["hello", "jq-count"],
        "refused": [],
        "version": None,
    }
    # The same bytes again: the same suite, 200, and still one row (the first name stays).
    again = server.http.post("/v1/suites", params={"name": "other"}, content=data, headers=GZIP)
    assert again.status_code == 200, again.text
    assert again.json() == created
    assert _suite_rows(server) == [(archive_id(data).removeprefix("sha256:"), "demo", "harbor")]

    got = server.http.get(f"/v1/suites/{created['id']}")
    assert got.status_code == 200 and got.json() == created
    # A team that never uploaded these bytes does not find them (tests/api/test_suite_owners.py).
    team = server.as_team(server.team_token("red"))
    assert team.get(f"/v1/suites/{created['id']}").status_code == 404
    # A plain tar is taken as well, as its own suite.
    plain = gzip.decompress(data)
    response = team.post(
        "/v1/suites",
        params={"name": "plain"},
        content=plain,
        headers={"content-type": "application/x-tar"},
    )
    assert response.status_code == 201 and response.json()["id"] == archive_id(plain)
    team.close()


def test_an_upload_keeps_the_tasks_that_load_and_names_each_other_with_why(
    server: Server, tmp_path: Path
) -> None:
    root = harbor_tree(tmp_path / "suite")
    (root / "hello" / "instruction.md").unlink()
    (root / "no-toml").mkdir()
    (root / "no-toml" / "instruction.md").write_text("Do it.\n")
    data = pack_directory(root)
    response = server.http.post("/v1/suites", params={"name": "half"}, content=data, headers=GZIP)
    assert response.status_code == 201, response.text
    created = response.json()
    assert created["tasks"] == ["jq-count"]
    refused = {entry["task"]: entry["problems"] for entry in created["refused"]}
    assert set(refused) == {"hello", "no-toml"}
    assert any("instruction.md is missing" in line for line in refused["hello"]), refused
    assert any("task.toml is missing" in line for line in refused["no-toml"]), refused
    # The suite's page says the same, from the stored bytes.
    assert server.http.get(f"/v1/suites/{created['id']}").json() == created

    # When no task loads, nothing is stored and every task's problem is named.
    (root / "jq-count" / "task.toml").write_text("[verifier\n")
    none = pack_directory(root)
    response = server.http.post("/v1/suites", params={"name": "none"}, content=none, headers=GZIP)
    assert response.status_code == 422, response.text
    message = response.json()["detail"][0]["msg"]
    assert "task hello" in message and "task jq-count" in message and "task no-toml" in message
    assert [row[1] for row in _suite_rows(server)] == ["half"]


def test_unknown_suites_are_404(server: Server) -> None:
    for suite_id in ("sha256:" + "0" * 64, "sha256:nothex", "smoke"):
        response = server.http.get(f"/v1/suites/{suite_id}")
        assert response.status_code == 404, (suite_id, response.text)
        assert "POST /v1/suites" in response.json()["detail"]


def test_without_a_valid_token_nothing_is_uploaded_or_read(server: Server, tmp_path: Path) -> None:
    data = pack_directory(harbor_tree(tmp_path / "suite"))
    anonymous = httpx.post(
        f"{server.url}/v1/suites", params={"name": "x"}, content=data, headers=GZIP
    )
    assert anonymous.status_code == 401 and "No API token" in anonymous.json()["detail"]
    forged = httpx.post(
        f"{server.url}/v1/suites",
        params={"name": "x"},
        content=data,
        headers={**GZIP, "authorization": "Bearer exh_not_a_token"},
    )
    assert forged.status_code == 401, forged.text
    assert httpx.get(f"{server.url}/v1/suites/{archive_id(data)}").status_code == 401
    assert _suite_rows(server) == []


def tar_of(*members: tuple[tarfile.TarInfo, bytes | None]) -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return gzip.compress(raw.getvalue())


class _Zeros:
    def read(self, size: int) -> bytes:
        return bytes(size)


def zeros_bomb(size: int) -> bytes:
    """A task and one file of `size` zeros, gzip'd as it is written (never whole in memory):
    a few hundred KiB on the wire."""
    out = io.BytesIO()
    with (
        gzip.GzipFile(fileobj=out, mode="wb") as compressed,
        tarfile.open(fileobj=compressed, mode="w") as tar,
    ):
        info, data = TASK
        tar.addfile(info, io.BytesIO(data or b""))
        zeros = tarfile.TarInfo("ok/zeros")
        zeros.size = size
        tar.addfile(zeros, _Zeros())  # type: ignore[arg-type]
    return out.getvalue()


def member(
    name: str, data: bytes = b"x", kind: bytes = tarfile.REGTYPE, link: str = ""
) -> tuple[tarfile.TarInfo, bytes | None]:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = link
    if kind == tarfile.REGTYPE:
        info.size = len(data)
        return info, data
    return info, None


TASK = member("ok/task.toml", b'version = "1.0"\n')


@pytest.mark.parametrize(
    ("archive", "loc", "words"),
    [
        (tar_of(TASK, member("../../etc/cron.d/x")), ["body", "../../etc/cron.d/x"], "'..'"),
        (tar_of(TASK, member("/etc/passwd")), ["body", "/etc/passwd"], "absolute path"),
        (
            tar_of(TASK, member("ok/out", kind=tarfile.SYMTYPE, link="../../../etc/shadow")),
            ["body", "ok/out"],
            "outside the root",
        ),
        (
            tar_of(TASK, member("ok/hard", kind=tarfile.LNKTYPE, link="ok/task.toml")),
            ["body", "ok/hard"],
            "hard link",
        ),
        (tar_of(TASK, member("ok/dev", kind=tarfile.CHRTYPE)), ["body", "ok/dev"], "a device"),
        (zeros_bomb(DEFAULT_MAX_UNPACKED_BYTES + 1), ["body"], "unpacks to more"),
        (b"not an archive at all", ["body"], "not a readable tar archive"),
        (tar_of(member("notes/readme.md")), ["body"], "task notes: task.toml is missing"),
        (
            tar_of(
                member("t/task.toml", b"[verifier]\ntimeout_sec = 'soon'\n"),
                member("t/instruction.md", b"Do it."),
                member("t/tests/test.sh", b"exit 0"),
                member("t/environment/Dockerfile", b"FROM debian:bookworm-slim"),
            ),
            ["body"],
            "task t: task.toml [verifier].timeout_sec",
        ),
    ],
    ids=[
        "dotdot",
        "absolute",
        "symlink-out",
        "hard-link",
        "device",
        "bomb",
        "garbage",
        "no-task",
        "bad-task-toml",
    ],
)
def test_a_bad_archive_is_422_naming_the_entry_and_stores_nothing(
    server: Server, archive: bytes, loc: list[str], words: str
) -> None:
    response = server.http.post("/v1/suites", params={"name": "bad"}, content=archive, headers=GZIP)
    assert response.status_code == 422, response.text
    (detail,) = response.json()["detail"]
    assert detail["loc"] == loc and words in detail["msg"], detail
    if len(loc) == 2:
        assert f"Archive entry {loc[1]!r}" in detail["msg"]
    assert _suite_rows(server) == []


@pytest.mark.parametrize(
    ("params", "headers"),
    [
        ({}, GZIP),
        ({"name": "has space"}, GZIP),
        ({"name": "x" * 101}, GZIP),
        ({"name": "ok"}, {"content-type": "application/json"}),
        ({"name": "ok"}, {}),
    ],
    ids=["no-name", "bad-name", "long-name", "json", "no-content-type"],
)
def test_a_bad_name_or_media_type_is_refused(
    server: Server, tmp_path: Path, params: dict[str, str], headers: dict[str, str]
) -> None:
    data = pack_directory(harbor_tree(tmp_path / "suite"))
    response = server.http.post("/v1/suites", params=params, content=data, headers=headers)
    if "name" in params and params["name"] == "ok":
        assert response.status_code == 415, response.text
        assert "application/gzip" in response.json()["detail"]
    else:
        assert response.status_code == 422, response.text
        assert response.json()["detail"][0]["loc"] == ["query", "name"]
    assert _suite_rows(server) == []


@pytest.fixture
def small_box(tmp_path: Path) -> Iterator[Server]:
    """A box that takes archives of at most 64 KiB (and other bodies of 2 KiB)."""
    settings = Settings(max_suite_archive_bytes=64 * 1024, max_body_bytes=2048)
    running = serve(
        f"sqlite:///{tmp_path / 'small.db'}",
        make_backend=lambda: FakeBackend(_no_sandbox),
        settings=settings,
    )
    yield running
    running.stop()


def test_an_archive_over_the_cap_is_413_before_it_is_read(
    small_box: Server, tmp_path: Path
) -> None:
    tree = harbor_tree(tmp_path / "suite")
    # Random bytes: the archive is as large as its content.
    (tree / "hello" / "environment" / "blob").write_bytes(os.urandom(80 * 1024))
    data = pack_directory(tree)
    assert len(data) > 64 * 1024
    declared = small_box.http.post("/v1/suites", params={"name": "big"}, content=data, headers=GZIP)
    assert declared.status_code == 413, declared.text
    assert "65536 bytes, EXAMHALL_MAX_SUITE_ARCHIVE_BYTES" in declared.json()["detail"]

    def chunks() -> Iterator[bytes]:  # no Content-Length: counted as it arrives
        for start in range(0, len(data), 8192):
            yield data[start : start + 8192]

    streamed = small_box.http.post(
        "/v1/suites", params={"name": "big"}, content=chunks(), headers=GZIP
    )
    assert streamed.status_code == 413, streamed.text
    assert "EXAMHALL_MAX_SUITE_ARCHIVE_BYTES" in streamed.json()["detail"]
    assert _suite_rows(small_box) == []
    # Under its cap an archive is taken though it is larger than other bodies may be.
    (tree / "hello" / "environment" / "blob").write_bytes(os.urandom(8 * 1024))
    response = small_box.http.post(
        "/v1/suites", params={"name": "fits"}, content=pack_directory(tree), headers=GZIP
    )
    assert response.status_code == 201, response.text
    # ...and the general cap still holds everywhere else.
    job = small_box.http.post("/v1/jobs", json={"suite": "smoke", "seed": 0, "x": "#" * 4096})
    assert job.status_code == 413 and "EXAMHALL_MAX_BODY_BYTES" in job.json()["detail"]
