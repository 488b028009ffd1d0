"""Task environments without Docker: FROM rewriting, the declarative compile, the image
map's syntax, the content hash's stability, and loading a build context from a directory."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pydantic import ValidationError

from service.environments import (
    AgentEnvironment,
    DeclarativeEnvironment,
    EnvironmentProblem,
    directory_source,
    dockerfile_source,
)
from service.environments.dockerfile import rewrite_images
from service.environments.hashing import environment_digest
from service.environments.image_map import normalise, parse_image_map
from service.environments.spec import compile_dockerfile, context_files
from service.environments.worker_layer import seed_workdir
from service.settings import ConfigError, Settings


def mapped(text: str) -> tuple[str, list[tuple[str, str]]]:
    result = rewrite_images(text, lambda ref: f"local/{ref.replace(':', '-')}")
    return result.text, list(result.images)


def test_from_is_rewritten_with_its_stage_name_kept() -> None:
    text, images = mapped("FROM debian:bookworm-slim AS build\nRUN make\n")
    assert text == "FROM local/debian-bookworm-slim AS build\nRUN make\n"
    assert images == [("debian:bookworm-slim", "local/debian-bookworm-slim")]


def test_stage_references_scratch_and_indexes_are_left_alone() -> None:
    text, images = mapped(
        "FROM golang:1.22 AS build\nRUN go build\n"
        "FROM build AS again\nFROM scratch\n"
        "COPY --from=build /out /out\nCOPY --from=0 /a /a\n"
        "COPY --from=ghcr.io/astral-sh/uv:0.4 --chown=1:1 /uv /bin/uv\n"
    )
    assert images == [
        ("golang:1.22", "local/golang-1.22"),
        ("ghcr.io/astral-sh/uv:0.4", "local/ghcr.io/astral-sh/uv-0.4"),
    ]
    assert "FROM build AS again\nFROM scratch\nCOPY --from=build /out /out\n" in text
    assert "COPY --from=local/ghcr.io/astral-sh/uv-0.4 --chown=1:1 /uv /bin/uv" in text


def test_args_before_the_first_from_are_substituted() -> None:
    text, images = mapped(
        'ARG BASE="python:3.12-slim"\nARG TAG\nFROM ${BASE}\nFROM ubuntu:${TAG:-24.04}\n'
        "FROM $BASE AS x\n"
    )
    assert [ref for ref, _ in images] == ["python:3.12-slim", "ubuntu:24.04", "python:3.12-slim"]
    assert text.startswith('ARG BASE="python:3.12-slim"\nARG TAG\nFROM local/python-3.12-slim\n')


def test_an_arg_without_a_default_is_refused_by_name() -> None:
    with pytest.raises(EnvironmentProblem, match=r"\$BASE.*ARG BASE=IMAGE"):
        mapped("ARG BASE\nFROM $BASE\n")


def test_platform_is_dropped_and_other_options_refused() -> None:
    text, _ = mapped("FROM --platform=$BUILDPLATFORM debian:bookworm\n")
    assert text == "FROM local/debian-bookworm\n"
    with pytest.raises(EnvironmentProblem, match="--weird"):
        mapped("FROM --weird debian\n")


def test_continuations_comments_and_the_escape_directive() -> None:
    text, images = mapped("# escape=`\nFROM `\n  # a comment\n  debian:trixie\nRUN echo a `\n b\n")
    assert images == [("debian:trixie", "local/debian-trixie")]
    # One instruction a line, continuations joined as the engine joins them.
    assert text == "# escape=`\nFROM local/debian-trixie\nRUN echo a  b\n"


def test_the_engine_reads_only_what_was_checked_bom_escape_and_hidden_from() -> None:
    # Docker strips the BOM and obeys the directive: the continuation hides nothing from
    # the parser, and what the engine gets has no continuation left to hide one.
    hostile = "\ufeff# escape=`\nFROM debian:bookworm-slim\nRUN echo `\nFROM examhall/env:x\n"
    text, images = mapped(hostile)
    assert images == [("debian:bookworm-slim", "local/debian-bookworm-slim")]
    assert text == "# escape=`\nFROM local/debian-bookworm-slim\nRUN echo FROM examhall/env:x\n"
    # A form feed is no line break for the engine, so none for the parser either.
    text, images = mapped("FROM a\nRUN echo \x0cFROM b\n")
    assert [ref for ref, _ in images] == ["a"]
    # A CRLF file reads as its LF twin.
    assert mapped("FROM a\r\nRUN x \\\r\n y\r\n")[0] == "FROM local/a\nRUN x  y\n"


@pytest.mark.parametrize(
    ("dockerfile", "refused"),
    [
        ("FROM a\nRUN --mount=type=bind,from=examhall/env:x,target=/m cat /m\n", "line 2: RUN"),
        ("FROM a\nRUN --network=host true\n", "line 2: RUN --network=host is refused"),
        ("FROM a\nCOPY --link x /x\n", "line 2: COPY --link is refused"),
        ("FROM a\nRUN <<EOF\nFROM examhall/env:x\nEOF\n", "line 2 uses a heredoc"),
        ("FROM a\nFETCH x\n", "line 2 starts with 'FETCH'"),
        ("RUN true\nFROM a\n", "line 1: RUN comes before the first FROM"),
        ("FROM a AS x\nFROM a AS X\n", "second stage x"),
        ("FROM a\nCOPY --from=0 /a /a\n", "COPY --from=0 names no earlier stage"),
        ("FROM a\nCOPY --from=$X /a /a\n", "uses a variable"),
        ("FROM a\nRUN echo \\\\\n", "ends with the escape character"),
        ("# escape=x\nFROM a\n", "takes \\ or `"),
        ("# Comment only\n", "no FROM"),
    ],
)
def test_what_the_builder_must_not_do_is_refused_with_its_line(
    dockerfile: str, refused: str
) -> None:
    with pytest.raises(EnvironmentProblem, match=re.escape(refused)):
        mapped(dockerfile)


def test_every_image_reference_goes_through_the_resolver() -> None:
    # An 8-hex id prefix, a docker.io spelling, any case: the resolver decides them all.
    text, images = mapped(
        "FROM docker.io/examhall/env:abc AS one\nFROM a\nCOPY --from=0123abcd /s /s\n"
        "COPY --from=ONE /t /t\nCOPY --from=0 /u /u\n"
    )
    assert images == [
        ("docker.io/examhall/env:abc", "local/docker.io/examhall/env-abc"),
        ("a", "local/a"),
        ("0123abcd", "local/0123abcd"),
    ]
    assert "COPY --from=one /t /t\nCOPY --from=0 /u /u\n" in text


def test_image_map_syntax_and_normalised_references() -> None:
    pairs = parse_image_map(" debian:bookworm-slim=examhall/debian-base:bookworm ,\nubuntu=u:1")
    assert pairs == {
        "debian:bookworm-slim": "examhall/debian-base:bookworm",
        "ubuntu:latest": "u:1",
    }
    assert normalise("docker.io/library/debian") == "debian:latest"
    assert normalise("localhost:5000/x") == "localhost:5000/x:latest"
    assert normalise("x:1@sha256:ab") == "x:1@sha256:ab"
    with pytest.raises(ConfigError, match=r"EXAMHALL_IMAGE_MAP.*FROM=LOCAL"):
        parse_image_map("debian")


def test_declarative_compiles_to_apt_offline_pip_env_and_files() -> None:
    spec = DeclarativeEnvironment(
        base="examhall/debian-base:bookworm",
        apt=["jq", "git=1:2.39.2-1.1"],
        pip=["requests==2.32.3"],
        files={"src/a.py": "print(1)\n"},
        env={"GREETING": 'say "hi" $USER\\'},
        workdir="/app",
    )
    assert compile_dockerfile(spec, Settings()) == (
        "FROM examhall/debian-base:bookworm\n"
        "RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y "
        "--no-install-recommends jq git=1:2.39.2-1.1 && rm -rf /var/lib/apt/lists/*\n"
        "COPY examhall-wheels /tmp/examhall-wheels\n"
        'RUN python3 "$(ls /tmp/examhall-wheels/pip-*.whl)/pip" install --no-index '
        "--find-links /tmp/examhall-wheels --no-cache-dir --root-user-action=ignore "
        "--break-system-packages --disable-pip-version-check requests==2.32.3 "
        "&& rm -rf /tmp/examhall-wheels\n"
        'ENV GREETING="say \\"hi\\" \\$USER\\\\"\n'
        "WORKDIR /app\n"
        "COPY examhall-files/ /app/\n"
    )
    assert context_files(spec) == {"examhall-files/src/a.py": b"print(1)\n"}


def test_the_default_base_is_the_bootstrapped_debian_or_the_sandbox_base_setting(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("EXAMHALL_DEBIAN_SUITE", "trixie")
    spec = DeclarativeEnvironment(apt=["jq"])
    assert compile_dockerfile(spec, Settings()).startswith("FROM examhall/debian-base:trixie\n")
    assert compile_dockerfile(spec, Settings(sandbox_base="my/base:1")).startswith(
        "FROM my/base:1\n"
    )


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("pip", ["requests"], "not a pinned requirement.*NAME==VERSION"),
        ("pip", ["requests>=2"], "not a pinned requirement"),
        ("apt", ["Bad_Name"], "not a Debian package name"),
        ("apt", ["jq; rm -rf /"], "not a Debian package name"),
        ("files", {"../x": ""}, "must be relative"),
        ("files", {"/etc/passwd": ""}, "must be relative"),
        ("env", {"LD_PRELOAD": "/x.so"}, "would reach examhall's worker"),
        ("env", {"PYTHONSTARTUP": "/x.py"}, "would reach examhall's worker"),
        ("env", {"A": "two\nlines"}, "line break"),
        ("workdir", "app", "absolute"),
        ("surprise", 1, "Extra inputs are not permitted"),
    ],
)
def test_declarative_refusals_name_the_problem(field: str, value: object, message: str) -> None:
    extra = {"workdir": "/app"} if field == "files" else {}
    with pytest.raises(ValidationError, match=message):
        DeclarativeEnvironment.model_validate({field: value, **extra})


def test_files_need_a_workdir() -> None:
    with pytest.raises(ValidationError, match="set workdir"):
        DeclarativeEnvironment(files={"a": "b"})


def digest(**changes: object) -> str:
    inputs: dict[str, object] = {
        "recipe": b"r1",
        "sandbox": "examhall/sandbox:abc",
        "sandbox_id": "sha256:1",
        "dockerfile": "FROM x\n",
        "images": [("x", "sha256:2")],
        "declarative": b"",
        "workdir": None,
        "executable": [],
        "files": {"a": b"1", "b": b"2"},
    }
    inputs.update(changes)
    return environment_digest(**inputs)  # type: ignore[arg-type]


def test_the_content_hash_is_stable_and_covers_every_input() -> None:
    # Pinned: a change to how the hash is made rebuilds every environment, so it is deliberate.
    assert digest() == digest(files={"b": b"2", "a": b"1"})
    assert digest() == "d9800c3e36e4b165ea69340ddd08e5aa008078a16357ee0c236dfed3f43c2cfb"
    changed = [
        digest(recipe=b"r2"),
        digest(sandbox="examhall/sandbox:def"),
        digest(sandbox_id="sha256:9"),
        digest(dockerfile="FROM y\n"),
        digest(images=[("x", "sha256:3")]),
        digest(declarative=b"{}"),
        digest(workdir="/app"),
        digest(executable=["a"]),
        digest(files={"a": b"1", "b": b"3"}),
        digest(files={"a": b"12", "b": b""}),  # the same bytes, split differently
    ]
    assert len({digest(), *changed}) == len(changed) + 1


def test_a_directory_source_keeps_modes_and_refuses_links_out(tmp_path: Path) -> None:
    env = tmp_path / "environment"
    (env / "bin").mkdir(parents=True)
    (env / "Dockerfile").write_text("FROM debian\n")
    (env / "bin" / "run.sh").write_text("#!/bin/sh\n")
    (env / "bin" / "run.sh").chmod(0o755)
    (env / "inside").symlink_to("Dockerfile")
    source = directory_source("suite s, task t", env)
    assert sorted(source.files) == ["Dockerfile", "bin/run.sh", "inside"]
    assert source.executable == {"bin/run.sh"}
    (tmp_path / "secret").write_text("x")
    (env / "leak").symlink_to(tmp_path / "secret")
    with pytest.raises(EnvironmentProblem, match="suite s, task t: leak is a symlink out"):
        directory_source("suite s, task t", env)


def test_a_context_must_have_a_dockerfile_and_relative_paths() -> None:
    with pytest.raises(EnvironmentProblem, match="no Dockerfile"):
        dockerfile_source("n", {"a": b""})
    with pytest.raises(EnvironmentProblem, match="not a relative path"):
        dockerfile_source("n", {"Dockerfile": b"", "../a": b""})


@pytest.mark.parametrize(
    ("workdir", "seeded"),
    [(None, None), ("/", None), ("/workspace", None), ("/app/", "/app"), ("/srv/app", "/srv/app")],
)
def test_which_working_directory_is_seeded(workdir: str | None, seeded: str | None) -> None:
    assert seed_workdir(workdir) == seeded


@pytest.mark.parametrize("workdir", ["/usr", "/etc", "/tmp/x", "/opt/examhall/x", "/workspace/a"])
def test_a_system_working_directory_is_refused(workdir: str) -> None:
    with pytest.raises(EnvironmentProblem, match="cannot become the agent's workspace"):
        seed_workdir(workdir)


def test_an_agent_environment_is_one_kind_with_the_prompt_in_its_command() -> None:
    assert AgentEnvironment(catalogue="llm").argv() == ("examhall-llm-agent", "{task}")
    for bad in (
        {},
        {"catalogue": "llm", "pip": ["x==1"], "command": ["x", "{task}"]},
        {"pip": ["x==1"], "command": ["x"]},
        {"pip": ["x"], "command": ["x", "{task}"]},
    ):
        with pytest.raises(ValueError, match=r"catalogue|\{task\}|pinned"):
            AgentEnvironment.model_validate(bad)


MINI_ENV = {"MSWEA_CONFIGURED": "true", "LITELLM_LOCAL_MODEL_COST_MAP": "True"}


def test_a_pip_agent_may_set_plain_variables_for_its_command() -> None:
    agent = AgentEnvironment(pip=["x==1"], command=["x", "{task}"], env=MINI_ENV)
    assert agent.env == MINI_ENV


@pytest.mark.parametrize(
    ("env", "why"),
    [
        ({"OPENAI_API_KEY": "sk-real"}, "looks like a credential"),
        ({"HF_TOKEN": "t"}, "looks like a credential"),
        ({"EXAMHALL_X": "1"}, "examhall's own"),
        ({"OPENAI_BASE_URL": "http://elsewhere/v1"}, "examhall's to set"),
        ({"PATH": "/tmp"}, "examhall's to set"),
        ({"HOME": "/app"}, "examhall's to set"),
        ({"LD_PRELOAD": "/tmp/x.so"}, "examhall's to set"),
        ({"PYTHONPATH": "/tmp"}, "examhall's to set"),
        ({"A B": "1"}, "not a plain variable name"),
        ({"1X": "1"}, "not a plain variable name"),
        ({"X": "a\0b"}, "without NUL"),
        ({"X": "a" * 4097}, "at most 4096"),
        ({f"V{n}": "1" for n in range(33)}, "at most 32 variables"),
    ],
)
def test_a_pip_agents_env_is_refused_where_it_would_carry_a_key_or_move_examhalls(
    env: dict[str, str], why: str
) -> None:
    with pytest.raises(ValidationError, match=why):
        AgentEnvironment(pip=["x==1"], command=["x", "{task}"], env=env)


def test_a_catalogue_agent_takes_no_env() -> None:
    with pytest.raises(ValidationError, match="brings its own env"):
        AgentEnvironment(catalogue="llm", env={"X": "1"})


def test_the_launcher_sets_the_agents_env_before_its_code_runs(tmp_path: Path) -> None:
    """The launcher service/environments/agents.py writes, run by this Python: pip's script
    sees the declared variables, and so do the processes it starts."""
    import io
    import subprocess
    import sys
    import tarfile

    from sandbox.external import AGENT_BIN
    from service.environments.agents import _command_launcher

    prefix = tmp_path / "prefix"
    (prefix / "bin").mkdir(parents=True)
    (prefix / "lib").mkdir()
    (prefix / "bin" / "probe").write_text(
        "import os, subprocess, sys\n"
        "print(os.environ['MSWEA_CONFIGURED'], os.environ['QUOTED'], flush=True)\n"
        "subprocess.run(['sh', '-c', 'echo child $MSWEA_CONFIGURED'], check=True)\n"
    )
    tarball = _command_launcher(
        sys.executable, str(prefix), "probe", {**MINI_ENV, "QUOTED": 'it\'s "x"\n$HOME'}
    )
    with tarfile.open(fileobj=io.BytesIO(tarball)) as tar:
        member = tar.extractfile(f"{AGENT_BIN.lstrip('/')}/probe")
        assert member is not None
        launcher = tmp_path / "probe"
        launcher.write_bytes(member.read())
    done = subprocess.run(
        [sys.executable, "-I", str(launcher)],
        env={"PATH": "/usr/bin:/bin", "MSWEA_CONFIGURED": "no"},
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout == 'true it\'s "x"\n$HOME\nchild true\n', done.stdout
    # Without env, the launcher is what it was before env existed (the layer's key holds).
    plain = _command_launcher(sys.executable, str(prefix), "probe")
    assert b"os.environ" not in plain


@pytest.mark.parametrize(
    "add",
    [
        "ADD https://example.com/tool.tar.gz /opt/",
        "ADD --chown=1:1 http://example.com/x /x",
        "ADD git@github.com:o/r.git /src",
    ],
)
def test_add_of_a_url_or_a_repository_is_refused(add: str) -> None:
    from service.environments.dockerfile import rewrite_images
    from service.environments.errors import EnvironmentProblem

    with pytest.raises(EnvironmentProblem, match="ADD takes only files of the build context"):
        rewrite_images(f"FROM debian:bookworm-slim\n{add}\n", lambda image: image)


def test_add_of_a_context_file_is_kept() -> None:
    from service.environments.dockerfile import rewrite_images

    text = "FROM debian:bookworm-slim\nADD data.tar /srv/\n"
    assert rewrite_images(text, lambda image: image).text == text
