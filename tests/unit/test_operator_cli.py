"""The operator's first hour: bad settings are `examhall: ...` and exit 2, never a
traceback, and nothing is created or started on the way. Each test runs the real command
line in a process of its own, on real SQLite."""

from __future__ import annotations

import http.server
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def examhall(
    *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("EXAMHALL_")}
    clean["PYTHONPATH"] = str(ROOT)
    return subprocess.run(
        [sys.executable, "-m", "service.cli", *args],
        cwd=cwd,
        env={**clean, **(env or {})},
        capture_output=True,
        text=True,
        timeout=120,
    )


def refused(done: subprocess.CompletedProcess[str], *words: str) -> str:
    """The one-line `examhall: ...` message of a command that exited 2."""
    assert done.returncode == 2, (done.returncode, done.stderr[-2000:])
    assert "Traceback" not in done.stderr, done.stderr
    message = done.stderr.strip().splitlines()[-1]
    assert message.startswith("examhall: "), done.stderr
    for word in words:
        assert word in message, message
    return message


# ----- tokens ---------------------------------------------------------------------------


class _Recorder(http.server.BaseHTTPRequestHandler):
    seen: list[str | None] = []  # one list per test: the fixture resets it

    def do_GET(self) -> None:
        _Recorder.seen.append(self.headers.get("Authorization"))
        body = b'{"detail": "no such job"}'
        self.send_response(404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_args: object) -> None:
        pass


@pytest.fixture
def recorder() -> Iterator[str]:
    """A server that records the Authorization header it is sent; its URL."""
    _Recorder.seen = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("bad", ["exh_é€", "exh_a b", "exh_\x01x", "exh_ok\nmore"])
def test_a_token_with_a_character_no_header_can_carry_is_refused_by_name(
    tmp_path: Path, recorder: str, bad: str
) -> None:
    done = examhall(
        "report", "job-x", "--server", recorder, cwd=tmp_path, env={"EXAMHALL_TOKEN": bad}
    )
    message = refused(done, "EXAMHALL_TOKEN", "printable ASCII")
    assert bad not in message  # a secret is never echoed back
    assert _Recorder.seen == []
    flag = examhall("report", "job-x", "--server", recorder, "--token", bad, cwd=tmp_path)
    refused(flag, "--token")


def test_a_token_pasted_with_its_trailing_newline_is_sent_without_it(
    tmp_path: Path, recorder: str
) -> None:
    done = examhall(
        "report", "job-x", "--server", recorder, cwd=tmp_path, env={"EXAMHALL_TOKEN": "exh_abc\r\n"}
    )
    # The server's own answer (404), not a refusal of the token.
    assert "HTTP 404" in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert _Recorder.seen == ["Bearer exh_abc"]


def test_serve_refuses_a_bad_admin_token_before_touching_the_store(tmp_path: Path) -> None:
    store = tmp_path / "store.db"
    done = examhall(
        "serve",
        "--port",
        "1",
        cwd=tmp_path,
        env={"EXAMHALL_ADMIN_TOKEN": "exh_ümlaut", "EXAMHALL_DATABASE_URL": f"sqlite:///{store}"},
    )
    refused(done, "EXAMHALL_ADMIN_TOKEN")
    assert not store.exists()


# ----- integer settings -----------------------------------------------------------------


@pytest.mark.parametrize("value", ["abc", "0", "-3", "2.5"])
def test_serve_refuses_a_max_containers_that_is_not_a_positive_integer(
    tmp_path: Path, value: str
) -> None:
    store = tmp_path / "store.db"
    done = examhall(
        "serve",
        "--port",
        "1",
        cwd=tmp_path,
        env={"EXAMHALL_MAX_CONTAINERS": value, "EXAMHALL_DATABASE_URL": f"sqlite:///{store}"},
    )
    refused(done, "EXAMHALL_MAX_CONTAINERS", "positive integer")
    assert not store.exists()


# ----- the store `examhall admin` uses ---------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "notaurl",
        "postgresql://user:s3cret@host:port/db",
        "nosuchdb://user:s3cret@host/db",
        "postgresql+psycopg://user:s3cret@127.0.0.1:1/db",
    ],
)
def test_admin_names_a_malformed_or_unreachable_database_url(tmp_path: Path, url: str) -> None:
    done = examhall("admin", "teams", cwd=tmp_path, env={"EXAMHALL_DATABASE_URL": url})
    message = refused(done, "EXAMHALL_DATABASE_URL")
    assert "s3cret" not in done.stderr, message


def test_admin_without_a_database_url_creates_no_store_unless_asked(tmp_path: Path) -> None:
    done = examhall("admin", "create-team", "red", cwd=tmp_path)
    assert "Using the store sqlite:///examhall.db (the default" in done.stderr
    refused(done, str(tmp_path / "examhall.db"), "--create")
    assert not (tmp_path / "examhall.db").exists()

    created = examhall("admin", "create-team", "red", "--create", cwd=tmp_path)
    assert created.returncode == 0, created.stderr
    assert (tmp_path / "examhall.db").exists()
    listed = examhall("admin", "teams", cwd=tmp_path)
    assert listed.returncode == 0 and "red" in listed.stdout, listed.stderr


def test_a_teams_egress_policies_are_set_at_creation_and_listed(tmp_path: Path) -> None:
    made = examhall("admin", "create-team", "red", "--create", "--egress", "mirrors", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    assert "egress policies mirrors (and offline)" in made.stdout
    assert examhall("admin", "create-team", "blue", "--egress", "", cwd=tmp_path).returncode == 0
    assert examhall("admin", "create-team", "green", cwd=tmp_path).returncode == 0
    bad = examhall("admin", "create-team", "grey", "--egress", "Mirrors!", cwd=tmp_path)
    refused(bad, "Egress policy name 'Mirrors!' is not one")
    rows = {
        line.split()[0]: line.split(None, 5)[-1]
        for line in examhall("admin", "teams", cwd=tmp_path).stdout.splitlines()[1:]
    }
    assert rows == {"blue": "offline only", "green": "every policy", "red": "mirrors"}, rows


def test_a_teams_share_is_set_at_creation_checked_and_listed(tmp_path: Path) -> None:
    made = examhall("admin", "create-team", "red", "--create", "--share", "3", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    assert "a share of 3" in made.stdout
    assert examhall("admin", "create-team", "blue", cwd=tmp_path).returncode == 0
    refused(examhall("admin", "create-team", "grey", "--share", "0", cwd=tmp_path), "share must")
    lines = examhall("admin", "teams", cwd=tmp_path).stdout.splitlines()
    assert lines[0].split()[3] == "share"  # team, max containers, share, ...
    shares = {line.split()[0]: line.split()[2] for line in lines[1:]}
    assert shares == {"blue": "1", "red": "3"}, lines


def test_admin_does_not_create_a_store_at_a_mistyped_url_either(tmp_path: Path) -> None:
    typo = tmp_path / "exmahall.db"
    done = examhall(
        "admin",
        "create-token",
        "--admin",
        cwd=tmp_path,
        env={"EXAMHALL_DATABASE_URL": f"sqlite:///{typo}"},
    )
    assert f"Using the store sqlite:///{typo} (from EXAMHALL_DATABASE_URL)" in done.stderr
    refused(done, "There is no store at")
    assert not typo.exists() and done.stdout == ""


def test_admin_refuses_an_empty_database_that_holds_no_store(tmp_path: Path) -> None:
    empty = tmp_path / "empty.db"
    empty.touch()
    done = examhall(
        "admin", "teams", cwd=tmp_path, env={"EXAMHALL_DATABASE_URL": f"sqlite:///{empty}"}
    )
    refused(done, "holds no examhall store", "--create")


# ----- serve binds first ----------------------------------------------------------------


def test_serve_on_a_port_in_use_fails_before_migrating_or_starting_anything(
    tmp_path: Path,
) -> None:
    store = tmp_path / "store.db"
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = examhall(
            "serve",
            "--port",
            str(port),
            cwd=tmp_path,
            env={"EXAMHALL_DATABASE_URL": f"sqlite:///{store}"},
        )
    refused(done, f"Port {port}", "already in use", "--port")
    # No migration ran (so no recovery, reaping or scheduler either): the store was not made.
    assert not store.exists()


def test_a_team_cap_that_the_boxs_own_cap_overrides_is_named(tmp_path: Path) -> None:
    box = {"EXAMHALL_MAX_CONTAINERS": "2"}
    wide = examhall(
        "admin", "create-team", "red", "--create", "--max-containers", "4", cwd=tmp_path, env=box
    )
    assert wide.returncode == 0, wide.stderr
    assert "at most 2 trial containers" in wide.stderr and "cap of 4 does not bind" in wide.stderr
    narrow = examhall(
        "admin", "create-team", "blue", "--max-containers", "1", cwd=tmp_path, env=box
    )
    assert narrow.returncode == 0 and "does not bind" not in narrow.stderr, narrow.stderr
