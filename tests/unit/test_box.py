"""The shared eval box's env file and build context, without Docker."""

from __future__ import annotations

import stat
import tomllib
from pathlib import Path

from service.cli.box import (
    ADMIN_TOKEN_KEY,
    IMAGE_KEY,
    POSTGRES_PASSWORD_KEY,
    PROJECT_KEY,
    load_box_context,
    missing_defaults,
    read_env_file,
    requirements,
    update_env_file,
)
from service.images.sandbox_image import repo_root


def test_update_keeps_the_operators_lines_and_replaces_only_given_keys(tmp_path: Path) -> None:
    env = tmp_path / ".env"
    env.write_text(
        "# my box\nEXAMHALL_PORT=9000\nexport EXAMHALL_IMAGE='old'\nOPENAI_API_KEY=sk-x\n"
    )
    update_env_file(env, {IMAGE_KEY: "examhall/control-plane:abc", "EXAMHALL_SANDBOX_BASE": "b"})
    assert env.read_text().splitlines() == [
        "# my box",
        "EXAMHALL_PORT=9000",
        "EXAMHALL_IMAGE=examhall/control-plane:abc",
        "OPENAI_API_KEY=sk-x",
        "EXAMHALL_SANDBOX_BASE=b",
    ]
    assert read_env_file(env)["OPENAI_API_KEY"] == "sk-x"
    # It holds secrets.
    assert stat.S_IMODE(env.stat().st_mode) == 0o600


def test_read_strips_quotes_and_skips_comments(tmp_path: Path) -> None:
    env = tmp_path / ".env"
    env.write_text('# A=1\n\nB="two words"\nexport C=3\nnot a setting\n')
    assert read_env_file(env) == {"B": "two words", "C": "3"}
    assert read_env_file(tmp_path / "missing") == {}


def test_secrets_are_generated_once_and_never_replaced() -> None:
    fresh = missing_defaults({}, postgres=True)
    assert set(fresh) == {PROJECT_KEY, ADMIN_TOKEN_KEY, POSTGRES_PASSWORD_KEY}
    assert len(fresh[ADMIN_TOKEN_KEY]) > 40 and len(fresh[POSTGRES_PASSWORD_KEY]) == 48
    assert missing_defaults(fresh, postgres=True) == {}
    # An operator's own token stays; only the password of a new PostgreSQL setup is added.
    assert set(missing_defaults({ADMIN_TOKEN_KEY: "mine"}, postgres=False)) == {PROJECT_KEY}
    assert missing_defaults({ADMIN_TOKEN_KEY: "x", PROJECT_KEY: "p"}, postgres=True).keys() == {
        POSTGRES_PASSWORD_KEY
    }


def test_the_context_has_what_the_control_plane_runs_from_and_no_caches() -> None:
    names = {name for name, _ in load_box_context().files}
    for needed in (
        "pyproject.toml",
        "service/cli/main.py",
        "examhall/client.py",
        "service/store/alembic.ini",
        "sandbox/worker.py",
        "docker/sandbox.Dockerfile",
        "evals/smoke.py",
    ):
        assert needed in names
    assert not any("__pycache__" in name or name.endswith(".pyc") for name in names)
    assert not any(name.startswith(("tests/", ".git/", "wheels/")) for name in names)


def test_requirements_are_the_dependencies_and_the_postgres_driver() -> None:
    project = tomllib.loads((repo_root() / "pyproject.toml").read_text())["project"]
    found = requirements()
    assert found[: len(project["dependencies"])] == project["dependencies"]
    assert any(r.startswith("psycopg") for r in found)
