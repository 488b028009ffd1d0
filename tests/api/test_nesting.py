"""Deeply nested TOML and JSON from a team answer 422 naming the document, over real HTTP,
and store nothing: Python's parsers recurse per level, so such a document used to raise
RecursionError inside the control plane (a 500 for a task.toml, a bare 400 for a body)."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa

from service.nesting import MAX_DEPTH, json_depth_exceeds
from service.suites.archives import pack_directory
from tests.api.test_suites import GZIP, harbor_tree
from tests.docker.conftest import Server

JSON = {"content-type": "application/json"}


def _count(server: Server, table: str) -> int:
    engine = sa.create_engine(server.database_url)
    with engine.connect() as connection:
        count: int = connection.execute(sa.text(f"SELECT count(*) FROM {table}")).scalar_one()
    engine.dispose()
    return count


# Each nests far past the parser's recursion (5000) or just past MAX_DEPTH, where the
# parser copes but the value is deeper than anything needs: both are refused alike.
DEEP_TOML = {
    "arrays": "[metadata]\nx = " + "[" * 5000 + "]" * 5000 + "\n",
    "inline-tables": "[metadata]\nx = " + "{a = " * 5000 + "1" + "}" * 5000 + "\n",
    "dotted-keys": "[metadata]\n" + ".".join(["a"] * 5000) + " = 1\n",
    "table-header": "[" + ".".join(["a"] * 5000) + "]\nb = 1\n",
    # The document and [metadata] are two levels: one more than MAX_DEPTH in all.
    "just-past-the-limit": "[metadata]\nx = " + "[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1),
}


@pytest.mark.parametrize("toml", DEEP_TOML.values(), ids=DEEP_TOML.keys())
def test_a_deeply_nested_task_toml_is_refused_naming_it(
    server: Server, tmp_path: Path, toml: str
) -> None:
    # Beside a task that loads, the deep one is left out and named (the upload keeps the
    # rest); alone, it is a 422 and nothing is stored.
    root = harbor_tree(tmp_path / "suite", tasks=("deep", "fine"))
    (root / "deep" / "task.toml").write_text('version = "1.0"\n' + toml)
    said = f"task deep: task.toml is nested more than {MAX_DEPTH} levels deep"
    response = server.http.post(
        "/v1/suites", params={"name": "deep"}, content=pack_directory(root), headers=GZIP
    )
    assert response.status_code == 201, response.text
    shown = response.json()
    assert shown["tasks"] == ["fine"]
    ((refused, problems),) = ((r["task"], r["problems"]) for r in shown["refused"])
    assert refused == "deep" and any(line.startswith(said) for line in problems), problems

    alone = harbor_tree(tmp_path / "alone", tasks=("deep",))
    (alone / "deep" / "task.toml").write_text('version = "1.0"\n' + toml)
    response = server.http.post(
        "/v1/suites", params={"name": "deep"}, content=pack_directory(alone), headers=GZIP
    )
    assert response.status_code == 422, response.text
    assert said in response.json()["detail"][0]["msg"]
    assert _count(server, "suites") == 1  # the first upload's alone


def test_a_task_toml_nested_within_the_limit_is_taken(server: Server, tmp_path: Path) -> None:
    root = harbor_tree(tmp_path / "suite", tasks=("nested",))
    depth = MAX_DEPTH - 2  # the document and [metadata] are the first two levels
    toml = "[metadata]\nx = " + "[" * depth + "]" * depth + "\n"
    (root / "nested" / "task.toml").write_text('version = "1.0"\n' + toml)
    response = server.http.post(
        "/v1/suites", params={"name": "nested"}, content=pack_directory(root), headers=GZIP
    )
    assert response.status_code == 201, response.text


@pytest.mark.parametrize("depth", [5000, 200_000, MAX_DEPTH + 1])
def test_a_deeply_nested_json_body_is_422(server: Server, depth: int) -> None:
    body = b'{"suite": "smoke", "seed": ' + b"[" * depth + b"]" * depth + b"}"
    response = server.http.post("/v1/jobs", content=body, headers=JSON)
    assert response.status_code == 422, response.text
    detail = response.json()["detail"][0]
    assert detail["loc"] == ["body"]
    assert f"The body is nested more than {MAX_DEPTH} levels deep" in detail["msg"]
    # Every route that takes JSON is covered, not only jobs.
    review = server.http.post("/v1/jobs/nope/reviews", content=body, headers=JSON)
    assert review.status_code == 422 and "nested more than" in review.text, review.text
    assert _count(server, "jobs") == 0


def test_brackets_in_strings_and_a_body_within_the_limit_pass_the_depth_check(
    server: Server,
) -> None:
    # Thousands of brackets in strings nest nothing: the job is judged on its merits (the
    # suite does not exist), not refused as deep.
    body = {"suite": "[{" * 5000, "cases": ["]" * 3000]}
    response = server.http.post("/v1/jobs", json=body)
    assert response.status_code == 422, response.text
    assert "nested more than" not in response.text
    assert response.json()["detail"][0]["loc"][:2] == ["body", "suite"], response.text
    # A string with an escaped quote does not end early and expose its brackets.
    assert not json_depth_exceeds(b'["\\"' + b"[" * 500 + b'"]')
    # Balanced but flat: many brackets, little depth.
    assert not json_depth_exceeds(b"[" + b"[],{}," * 10_000 + b"[]]")
