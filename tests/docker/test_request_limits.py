"""What one request may ask of the box: body size, plan size, variants; and bodies that are
not JSON answer 422 saying why, as docs/getting-started.md promises."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
import sqlalchemy as sa

from service.settings import Settings
from tests.docker.conftest import Server

pytestmark = pytest.mark.docker

GOOD = {"suite": "smoke", "model": {"provider": "faux", "id": "solution"}}
LIMITS = Settings(max_body_bytes=64 * 1024, max_planned_trials=100, max_variants=2)


def _jobs(server: Server) -> int:
    engine = sa.create_engine(server.database_url)
    with engine.connect() as connection:
        count: int = connection.execute(sa.text("SELECT count(*) FROM jobs")).scalar_one()
    engine.dispose()
    return count


def test_body_plan_and_variant_caps(start_server: Callable[..., Server]) -> None:
    server = start_server(settings=LIMITS)
    big = {**GOOD, "suite": {"name": "big", "source": "#" * 70_000}}
    response = server.http.post("/v1/jobs", json=big)
    assert response.status_code == 413, response.text
    assert "larger than this box accepts (65536 bytes" in response.json()["detail"]

    def chunks() -> Iterator[bytes]:  # no Content-Length: counted as it arrives
        yield b'{"suite": {"name": "big", "source": "'
        for _ in range(10):
            yield b"#" * 10_000
        yield b'"}}'

    chunked = server.http.post(
        "/v1/jobs", content=chunks(), headers={"content-type": "application/json"}
    )
    assert chunked.status_code == 413, chunked.text

    variants = {name: {} for name in ("a", "b", "c")}
    response = server.http.post("/v1/jobs", json={**GOOD, "variants": variants, "baseline": "a"})
    assert response.status_code == 422, response.text
    detail = response.json()["detail"][0]
    assert detail["loc"] == ["body", "variants"] and "at most 2 per job" in detail["msg"]

    response = server.http.post("/v1/jobs", json={**GOOD, "rounds": 1000})
    assert response.status_code == 422, response.text
    detail = response.json()["detail"][0]
    assert detail["loc"] == ["body", "rounds"]
    assert "plans 4000 trials (4 cases x 1 variants x 1000 rounds)" in detail["msg"]
    assert _jobs(server) == 0
    # Within the caps the same job is accepted.
    assert server.http.post("/v1/jobs", json={**GOOD, "rounds": 25}).status_code == 201


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b'{"suite": "smoke", "model": ', "JSON decode error"),
        (b'{"suite": "sm\xffoke"}', "not valid UTF-8 (byte 13)"),
        (b'{"suite": "smoke", "seed": ' + b"9" * 5000 + b"}", "more than 4300 digits"),
        (b'{"suite": "smoke", "model": "simulated/coin"}', 'give the model as {"provider"'),
        (b'{"suite": "smoke", "cases": ["a", "a"]}', "cases lists a case twice"),
    ],
    ids=["truncated", "invalid-utf8", "huge-integer", "model-as-text", "our-own-check"],
)
def test_bodies_the_api_refuses_are_422_in_words_the_caller_can_act_on(
    start_server: Callable[..., Server], body: bytes, message: str
) -> None:
    server = start_server()
    response = server.http.post(
        "/v1/jobs", content=body, headers={"content-type": "application/json"}
    )
    assert response.status_code == 422, response.text
    detail = response.json()["detail"][0]
    assert detail["loc"][0] == "body" and message in detail["msg"], detail
    # Python's and pydantic's own words are not the caller's to act on.
    assert "set_int_max_str_digits" not in detail["msg"] and "dictionary" not in detail["msg"]
    assert not detail["msg"].startswith("Value error"), detail
    assert _jobs(server) == 0
