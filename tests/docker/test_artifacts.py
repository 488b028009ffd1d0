"""Artifacts over HTTP: the listing and the download agree, and downloads are attachments."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import sqlalchemy as sa

from tests.docker.conftest import Server

pytestmark = pytest.mark.docker

QUICK = {
    "suite": "smoke",
    "cases": ["create-greeting"],
    "model": {"provider": "simulated", "id": "coin?p=1"},
}
# Names an older store may hold (nothing stores them now): listed before, never fetchable.
STORED_BAD = ["a/b", "bad\x01name", "..", "nul\x00"]


def test_listing_and_download_agree_and_downloads_are_attachments(
    start_server: Callable[..., Server],
) -> None:
    server = start_server()
    job = server.wait(server.submit(**QUICK)["id"])
    (trial,) = server.http.get(f"/v1/jobs/{job['id']}/trials").json()
    engine = sa.create_engine(server.database_url)
    with engine.begin() as connection:
        for name in STORED_BAD:
            connection.execute(
                sa.text(
                    "INSERT INTO artifacts (trial_id, name, sha256, size, content) "
                    "VALUES (:t, :n, 'x', 1, :c)"
                ),
                {"t": trial["id"], "n": name, "c": b"<html><script>alert(1)</script>"},
            )
    engine.dispose()

    listed = server.http.get(f"/v1/trials/{trial['id']}").json()["artifacts"]
    assert listed == ["session.jsonl"]
    for name in listed:
        response = server.http.get(f"/v1/trials/{trial['id']}/artifacts/{name}")
        assert response.status_code == 200
        assert response.headers["x-content-type-options"] == "nosniff"
        assert response.headers["content-disposition"].startswith("attachment; filename=")
    for encoded in ("bad%01name", "%2E%2E", "nul%00"):
        response = server.http.get(f"/v1/trials/{trial['id']}/artifacts/{encoded}")
        assert response.status_code == 404, (encoded, response.text)
