"""A job's event stream ends when its caller's token is revoked or web session ends."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator

import httpx
import pytest
import sqlalchemy as sa

from service.settings import Settings
from tests.docker.conftest import Server
from tests.docker.peer import peer_running_job

pytestmark = pytest.mark.docker


def events(response: httpx.Response) -> Iterator[tuple[str, dict[str, object]]]:
    name = ""
    for line in response.iter_lines():
        if line.startswith("event: "):
            name = line.removeprefix("event: ")
        elif line.startswith("data: "):
            yield name, json.loads(line.removeprefix("data: "))


def _revoke_all(server: Server) -> None:
    engine = sa.create_engine(server.database_url)
    with engine.begin() as connection:
        connection.execute(sa.text("UPDATE tokens SET revoked_at = '2000-01-01 00:00:00'"))
    engine.dispose()


@pytest.mark.parametrize("credential", ["bearer", "session"])
def test_a_revoked_callers_stream_ends(
    start_server: Callable[..., Server], credential: str
) -> None:
    server = start_server(settings=Settings(stream_recheck_s=0.5))
    token = server.team_token("red")
    job_id = peer_running_job(server.database_url, "red")  # runs as long as the test needs
    if credential == "bearer":
        client = server.as_team(token)
    else:
        client = httpx.Client(base_url=server.url, timeout=120)
        assert client.post("/ui/login", data={"token": token}).status_code == 303
    seen: list[str] = []
    # The read timeout only bounds a broken test: the old stream never ends while the job runs.
    with client.stream("GET", f"/v1/jobs/{job_id}/stream", timeout=60) as response:
        assert response.status_code == 200
        for name, data in events(response):
            seen.append(name)
            if name == "counts":
                assert data["status"] == "running"
                if credential == "bearer":
                    _revoke_all(server)
                else:
                    assert client.post("/ui/logout").status_code == 303
            if name == "end":
                assert data == {"status": "unauthorized"}
                break
    client.close()
    assert seen[-1] == "end" and "counts" in seen
    # The job itself goes on: only this caller lost sight of it.
    assert server.http.get(f"/v1/jobs/{job_id}").json()["status"] == "running"
