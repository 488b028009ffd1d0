"""`examhall serve` as a new user meets it: it says where it answers, and Ctrl-C stops it
with a line, not a traceback; a command that cannot reach it names the server it tried."""

from __future__ import annotations

import signal
import uuid
from pathlib import Path

import pytest

from service.cli.main import main
from tests.docker.conftest import free_port, serve_process, wait_healthy

pytestmark = pytest.mark.docker


def test_serve_says_its_url_and_stops_on_ctrl_c_without_a_traceback(tmp_path: Path) -> None:
    port, log = free_port(), tmp_path / "serve.log"
    token = f"exh_serve_{uuid.uuid4().hex}"
    process = serve_process(f"sqlite:///{tmp_path / 'x.db'}", port, log, token=token,
                            max_containers=1)  # fmt: skip
    try:
        wait_healthy(process, port, log)
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=60) == 0, log.read_text()[-3000:]
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    said = log.read_text()
    assert f"examhall: serving at http://127.0.0.1:{port} (the API under /v1" in said, said
    assert said.rstrip().endswith("examhall: stopped."), said[-2000:]
    assert "Traceback" not in said, said


def test_a_command_that_cannot_reach_the_server_names_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    server = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    assert main(["report", "job-x", "--server", server, "--token", "exh_" + "0" * 32]) == 2
    said = capsys.readouterr().err
    assert f"cannot reach the control plane at {server}" in said, said
    assert "--server (or $EXAMHALL_SERVER)" in said
