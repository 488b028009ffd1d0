"""A throwaway PostgreSQL server of a test's own: its own data directory and port, so a test
may stop and start it without touching the box's cluster (which other runs share)."""

from __future__ import annotations

import glob
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.docker.conftest import free_port

# Debian's server binaries (the postgresql package); the newest installed major.
BINARIES = "/usr/lib/postgresql/*/bin"
# The server refuses to run as root: its files and processes belong to this user.
SERVER_USER = "postgres"


@dataclass
class OwnPostgres:
    bin: Path
    home: Path
    port: int

    @property
    def url(self) -> str:
        return f"postgresql+psycopg://examhall@127.0.0.1:{self.port}/postgres"

    def _pg_ctl(self, *args: str) -> None:
        command = ["runuser", "-u", SERVER_USER, "--", str(self.bin / "pg_ctl")]
        command += ["-D", str(self.home / "data"), *args]
        done = subprocess.run(command, capture_output=True, text=True, timeout=120, cwd=self.home)
        assert done.returncode == 0, f"pg_ctl {args[-1]}: {done.stdout}{done.stderr}"

    def start(self) -> None:
        # fsync off: a test's server need not survive a power loss, and syncs are slow here.
        options = f"-p {self.port} -k {self.home} -c listen_addresses=127.0.0.1 -c fsync=off"
        self._pg_ctl("-l", str(self.home / "server.log"), "-o", options, "-w", "start")

    def stop(self) -> None:
        """A fast shutdown: the server ends its clients' sessions, as a restart by an
        operator (or a crash of the server's host) does."""
        self._pg_ctl("-m", "fast", "-w", "stop")


def own_postgres() -> OwnPostgres:
    """A new server, started; skips the test where the server's binaries are not installed."""
    found = sorted(glob.glob(BINARIES), key=lambda p: int(Path(p).parent.name))
    if not found or shutil.which("runuser") is None:
        pytest.skip(f"no PostgreSQL server binaries at {BINARIES} (apt-get install postgresql)")
    bin = Path(found[-1])
    # Under /tmp, not pytest's tmp_path: the server's user must be able to reach it.
    home = Path(tempfile.mkdtemp(prefix="examhall-pg-"))
    shutil.chown(home, SERVER_USER)
    initdb = [str(bin / "initdb"), "-D", str(home / "data"), "-U", "examhall"]
    initdb += ["--auth=trust", "-E", "UTF8", "--no-sync"]
    done = subprocess.run(
        ["runuser", "-u", SERVER_USER, "--", *initdb],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=home,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    server = OwnPostgres(bin, home, free_port())
    server.start()
    return server


def remove(server: OwnPostgres) -> None:
    """Stop the server if it runs, and remove its files."""
    if (server.home / "data" / "postmaster.pid").exists():
        server.stop()
    shutil.rmtree(server.home, ignore_errors=True)
