"""The web UI's sessions and cross-site refusal over real HTTP, with real SQLite."""

from __future__ import annotations

import hashlib
from collections.abc import Callable

import httpx
import pytest
import sqlalchemy as sa

from service.api.sessions import SESSION_COOKIE
from service.settings import Settings
from tests.docker.conftest import Server
from tests.docker.peer import peer_running_job

pytestmark = pytest.mark.docker


def sign_in(server: Server, token: str, **headers: str) -> httpx.Client:
    browser = httpx.Client(base_url=server.url, timeout=60)
    response = browser.post("/ui/login", data={"token": token}, headers=headers)
    assert response.status_code == 303, response.text
    return browser


def _sessions(server: Server) -> list[tuple[str, str]]:
    engine = sa.create_engine(server.database_url)
    with engine.connect() as connection:
        rows = connection.execute(sa.text("SELECT sha256, token_sha256 FROM web_sessions"))
        found = [(r[0], r[1]) for r in rows]
    engine.dispose()
    return found


def _status(server: Server, job_id: str) -> str:
    status: str = server.http.get(f"/v1/jobs/{job_id}").json()["status"]
    return status


def test_sessions_are_random_stored_hashed_and_end(start_server: Callable[..., Server]) -> None:
    server = start_server()
    token = server.team_token("red")
    browser = sign_in(server, token)
    cookie = browser.cookies[SESSION_COOKIE]
    assert token not in cookie and cookie.startswith("exs_")
    # The store keeps the cookie's hash only, tied to the token's hash.
    token_hash = hashlib.sha256(token.encode()).hexdigest()
    assert _sessions(server) == [(hashlib.sha256(cookie.encode()).hexdigest(), token_hash)]
    assert browser.get("/ui/jobs").status_code == 200
    assert browser.get("/v1/jobs").status_code == 200  # reads take the cookie
    # The cookie is not a token: as a bearer it is refused.
    assert server.as_team(cookie).get("/v1/jobs").status_code == 401

    # Signing out deletes the session; the same cookie, replayed, opens nothing.
    assert browser.post("/ui/logout").status_code == 303
    assert _sessions(server) == []
    replay = httpx.Client(base_url=server.url, cookies={SESSION_COOKIE: cookie})
    assert replay.get("/ui/jobs").headers["location"].startswith("/ui/login")
    assert replay.get("/v1/jobs").status_code == 401

    # An expired session opens nothing either.
    expiring = sign_in(server, token)
    engine = sa.create_engine(server.database_url)
    with engine.begin() as connection:
        connection.execute(sa.text("UPDATE web_sessions SET expires_at = '2000-01-01 00:00:00'"))
    engine.dispose()
    assert expiring.get("/v1/jobs").status_code == 401

    # Revoking the token ends its sessions.
    revoked = sign_in(server, token)
    assert revoked.get("/v1/jobs").status_code == 200
    with engine.begin() as connection:
        connection.execute(sa.text("UPDATE tokens SET revoked_at = '2000-01-01 00:00:00'"))
    engine.dispose()
    assert revoked.get("/v1/jobs").status_code == 401


@pytest.mark.parametrize("forced", [False, True], ids=["plain", "forced-secure"])
def test_the_secure_flag_is_set_when_the_setting_says(
    start_server: Callable[..., Server], forced: bool
) -> None:
    server = start_server(settings=Settings(cookie_secure=forced))
    response = httpx.post(f"{server.url}/ui/login", data={"token": server.token})
    attributes = [a.strip().lower() for a in response.headers["set-cookie"].split(";")]
    assert ("secure" in attributes) is forced
    assert "httponly" in attributes and "samesite=strict" in attributes


CROSS_SITE = [
    {"Origin": "http://127.0.0.1:1"},  # same host, another port: SameSite lets it through
    {"Origin": "http://evil.example"},
    {"Origin": "null"},
    {"Sec-Fetch-Site": "same-site"},
    {"Sec-Fetch-Site": "cross-site"},
]


def test_cross_site_posts_and_cookie_writes_are_refused(
    start_server: Callable[..., Server],
) -> None:
    server = start_server()
    token = server.team_token("red")
    job_id = peer_running_job(server.database_url, "red")
    browser = sign_in(server, token)
    # Same host and port, another scheme: another origin.
    downgraded = {"Origin": server.url.replace("http://", "https://")}
    for headers in [*CROSS_SITE, downgraded]:
        cancel = browser.post(f"/ui/jobs/{job_id}/cancel", headers=headers)
        assert cancel.status_code == 403 and "another" in cancel.text, headers
        login = httpx.post(f"{server.url}/ui/login", data={"token": token}, headers=headers)
        assert login.status_code == 403 and SESSION_COOKIE not in login.cookies, headers
        logout = browser.post("/ui/logout", headers=headers)
        assert logout.status_code == 403, headers
    # On /v1 the cookie is for reads only, even from this origin.
    own = {"Origin": server.url, "Sec-Fetch-Site": "same-origin"}
    delete = browser.delete(f"/v1/jobs/{job_id}", headers=own)
    assert delete.status_code == 403 and "reads only" in delete.json()["detail"]
    submit = browser.post("/v1/jobs", json={"suite": "smoke"}, headers=own)
    assert submit.status_code == 403
    assert _status(server, job_id) == "running"
    assert browser.get("/v1/jobs").status_code == 200  # the session survived every attempt

    # From the UI's own page the same cancel works.
    cancel = browser.post(f"/ui/jobs/{job_id}/cancel", headers=own)
    assert cancel.status_code == 303
    assert _status(server, job_id) == "cancelled"
    assert browser.post("/ui/logout", headers=own).status_code == 303
