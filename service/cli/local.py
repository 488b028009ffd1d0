"""A control plane of this command's own, on loopback, for the commands that run a job
without a box (`examhall demo`, `examhall check-tasks --local`)."""

from __future__ import annotations

import socket
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

from examhall import Client
from service.store.db import database_url


def progress(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextmanager
def local_control_plane() -> Iterator[Client]:
    """A client of a control plane started for this command (on $EXAMHALL_DATABASE_URL, else
    ./examhall.db), stopped, its scheduler drained, when the block ends."""
    import uvicorn

    from service.app import create_app

    port = free_port()
    # A token of this run only: the control plane listens on loopback for its lifetime.
    token = f"exh_local_{uuid.uuid4().hex}"
    server = uvicorn.Server(
        uvicorn.Config(
            create_app(admin_token=token), host="127.0.0.1", port=port, log_level="warning"
        )
    )
    thread = threading.Thread(target=server.run, name="examhall-local-server", daemon=True)
    progress(f"Starting the control plane on http://127.0.0.1:{port} (database {database_url()})")
    thread.start()
    client = None
    try:
        while not server.started:
            if not thread.is_alive():
                raise SystemExit("examhall: the control plane failed to start; see above.")
            time.sleep(0.1)
        client = Client(f"http://127.0.0.1:{port}", token)
        yield client
    finally:
        if client is not None:
            client.close()
        server.should_exit = True
        thread.join(timeout=60)
