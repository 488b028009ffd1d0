"""service/suites/harbor: Harbor-format suites read into tasks, their task.toml type-checked and its
limits mapped onto examhall's, and what examhall cannot honour refused by task and field."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from service.domain.job_spec import MAX_TIMEOUT_S
from service.suites import SuiteError
from service.suites.harbor import (
    HarborTaskError,
    TaskLimits,
    is_harbor_tree,
    load_task_dir,
    load_tasks,
    map_limits,
    parse_task_config,
    read_tree,
)
from service.suites.harbor.limits import MAX_CPUS, MAX_MEMORY_BYTES, MAX_STORAGE_BYTES
from service.suites.harbor.tasks import MAX_CARRIED_BYTES, MAX_NAME_BYTES

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "evals" / "harbor_demo"
DEMO_TASKS = sorted(p.name for p in DEMO.iterdir() if (p / "task.toml").is_file())
ONLINE = "pytest-from-pypi"  # the one task whose verifier needs a package index
COOKBOOK = ROOT / "tests" / "fixtures" / "harbor_cookbook"
MiB = 1024 * 1024

BASE_TOML = """\
version = "1.0"

[agent]
timeout_sec = 120.0

[verifier]
timeout_sec = 60.0

[environment]
cpus = 1
memory_mb = 512
"""


def tree(
    toml: str = BASE_TOML, task: str = "t1", changes: dict[str, bytes | None] | None = None
) -> dict[str, bytes]:
    """A one-task suite in memory; `changes` adds or replaces files by path, None drops one."""
    files: dict[str, bytes | None] = {
        "task.toml": toml.encode(),
        "instruction.md": b"Do the thing.\n",
        "environment/Dockerfile": b"FROM debian:bookworm-slim\nWORKDIR /app\n",
        "tests/test.sh": b"#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n",
        "solution/solve.sh": b"#!/bin/bash\ntrue\n",
    }
    files.update(changes or {})
    return {f"{task}/{path}": data for path, data in files.items() if data is not None}


def refusal(files: dict[str, bytes]) -> str:
    with pytest.raises(HarborTaskError) as caught:
        load_tasks(files)
    return str(caught.value)


def with_toml(extra: str) -> dict[str, bytes]:
    return tree(BASE_TOML + "\n" + extra)


# The shipped example.


def test_the_shipped_example_loads_with_its_limits_mapped() -> None:
    tasks = load_task_dir(DEMO)
    assert [task.id for task in tasks] == DEMO_TASKS
    for task in tasks:
        assert task.limits.agent_timeout_s == 300.0
        # The online task's verifier installs pytest first.
        assert task.limits.verifier_timeout_s == (120.0 if task.id == ONLINE else 60.0)
        assert task.limits.build_timeout_s == 600.0
        assert task.limits.cpus == 1.0
        assert task.limits.memory_bytes == 512 * MiB
        assert task.limits.storage_bytes == 256 * MiB
        # One task works in a directory of its own, one as a user of its own.
        assert task.limits.workdir == ("/srv/ledger" if task.id == "custom-workdir" else "/app")
        assert task.limits.agent_user == ("agent" if task.id == "agent-user" else None)
        assert task.docker_image is None
        assert task.has_solution
        assert "Dockerfile" in task.environment_files
        assert "test.sh" in task.tests
        assert task.instruction.strip()
    by_id = {task.id: task for task in tasks}
    git = by_id["git-commit"]
    assert git.name == "examhall/git-commit"
    assert git.limits.verifier_env == {"EXPECTED_MESSAGE": "Add release notes"}
    assert git.limits.solution_env["GIT_AUTHOR_NAME"] == "Exam Hall"
    assert git.environment_files["notes.txt"].startswith(b"Release 1.4.0")
    # The legacy spelling (version, memory = "512M", allow_internet = false) of count-lines.
    assert by_id["count-lines"].name is None
    assert by_id["count-lines"].metadata["difficulty"] == "easy"
    assert sorted(by_id["count-lines"].environment_files) == [
        "Dockerfile",
        "logs/api.log",
        "logs/db.log",
        "logs/worker.log",
    ]


def test_the_shipped_example_uses_both_reward_files_and_one_task_a_network() -> None:
    scripts = {task.id: task.tests["test.sh"].decode() for task in load_task_dir(DEMO)}
    assert "reward.json" in scripts["count-lines"]
    assert "reward.txt" in scripts["git-commit"] and "reward.txt" in scripts["jq-filter"]
    for task in load_task_dir(DEMO):
        # One task asks for a network, as exported tasks do, and its verifier uses it.
        assert task.limits.wanted_network == ("public" if task.id == ONLINE else None), task.id
        for script in (task.tests["test.sh"], task.solution["solve.sh"]):
            for online in (b"apt-get", b"pip ", b"uv ", b"curl", b"wget", b"sudo"):
                if (task.id, script, online) != (ONLINE, task.tests["test.sh"], b"pip "):
                    assert online not in script, (task.id, online)
    assert "pip install" in scripts[ONLINE]


def test_the_in_memory_and_directory_loaders_agree() -> None:
    assert load_tasks(read_tree(DEMO)) == load_task_dir(DEMO)
    one = DEMO / "jq-filter"
    assert load_task_dir(one) == [t for t in load_task_dir(DEMO) if t.id == "jq-filter"]
    assert load_tasks(read_tree(one), root_name="jq-filter") == load_task_dir(one)


def test_a_real_cookbook_task_loads_as_it_is() -> None:
    (task,) = load_task_dir(COOKBOOK / "simple-task")
    assert task.id == "simple-task"
    assert task.instruction.startswith("Create a file called hello.txt")
    assert task.limits == TaskLimits(
        agent_timeout_s=120.0,
        verifier_timeout_s=120.0,
        build_timeout_s=600.0,
        cpus=1.0,
        memory_bytes=2048 * MiB,
        storage_bytes=10240 * MiB,
        network="public",  # Harbor's default: the recipe leaves it unset
    )
    assert set(task.tests) == {"test.sh", "test_state.py"}
    assert task.environment_files == {"Dockerfile": b"FROM ubuntu:24.04\n\nWORKDIR /app\n"}


@pytest.mark.parametrize(
    ("recipe", "fields"),
    [
        ("mcp-tools", ["[[environment.mcp_servers]] (mcp-server)"]),
        ("multi-step", ["[[steps]] (3 steps)"]),
        ("skills", ["[environment].skills_dir"]),
        (
            "computer-use-windows",
            ["[environment.env].DAYTONA_API_KEY", "[environment.env].DAYTONA_API_URL"],
        ),
    ],
)
def test_real_cookbook_features_examhall_cannot_honour_are_refused(
    recipe: str, fields: list[str]
) -> None:
    config = parse_task_config((COOKBOOK / "task_tomls" / f"{recipe}.toml").read_bytes())
    _, problems = map_limits(config)
    for name in fields:
        assert any(problem.startswith(name) for problem in problems), (name, problems)


# The tree.


def test_is_harbor_tree() -> None:
    assert is_harbor_tree(tree())
    assert is_harbor_tree({"task.toml": b"", "instruction.md": b"x"})
    assert not is_harbor_tree({"smoke.py": b"CASES = []"})
    assert not is_harbor_tree({"a/b/task.toml": b""})
    assert not is_harbor_tree({".hidden/task.toml": b""})


def test_tasks_are_sorted_by_id_and_top_level_files_ignored() -> None:
    files = {**tree(task="zeta"), **tree(task="alpha"), "README.md": b"# suite", ".git/x": b""}
    assert [task.id for task in load_tasks(files)] == ["alpha", "zeta"]


def test_a_task_at_the_root_takes_its_name() -> None:
    files = {path.split("/", 1)[1]: data for path, data in tree().items()}
    assert load_tasks(files, root_name="mine")[0].id == "mine"
    named = BASE_TOML.replace('version = "1.0"', 'version = "1.0"\n[task]\nname = "org/hello"')
    files["task.toml"] = named.encode()
    assert load_tasks(files)[0].id == "hello"
    files["task.toml"] = BASE_TOML.encode()
    assert "the task at the root has no name" in refusal(files)


def test_a_directory_without_task_toml_is_refused_with_a_hint() -> None:
    files = {**tree(), **{f"wrap/{p}": d for p, d in tree(task="inner").items()}}
    message = refusal(files)
    assert "task wrap: task.toml is missing" in message
    assert "wrap/inner/task.toml" in message


def test_an_empty_tree_and_bad_paths_are_refused() -> None:
    assert "no task.toml" in refusal({"README.md": b"x"})
    assert "'..'" in refusal({**tree(), "t1/../evil": b"x"})


def test_a_task_id_must_be_a_case_id() -> None:
    message = refusal(tree(task="bad\x01id"))
    assert "not a usable case id" in message and "control character" in message


def test_a_link_out_of_the_suite_is_refused(tmp_path: Path) -> None:
    suite = tmp_path / "suite"
    for path, data in tree().items():
        (suite / path).parent.mkdir(parents=True, exist_ok=True)
        (suite / path).write_bytes(data)
    (tmp_path / "secret").write_text("x")
    inside = suite / "t1" / "environment" / "alias"
    os.symlink(suite / "t1" / "instruction.md", inside)
    assert load_task_dir(suite)[0].environment_files["alias"] == b"Do the thing.\n"
    os.symlink(tmp_path / "secret", suite / "t1" / "environment" / "leak")
    with pytest.raises(HarborTaskError, match="outside the suite"):
        load_task_dir(suite)


# Required files.


@pytest.mark.parametrize(
    "missing", ["instruction.md", "tests/test.sh", "environment/Dockerfile", "task.toml"]
)
def test_a_missing_required_file_is_refused_naming_task_and_file(missing: str) -> None:
    message = refusal(tree(changes={missing: None}))
    assert f"task t1: {missing} is missing" in message


def test_docker_image_makes_the_dockerfile_optional() -> None:
    files = tree(
        BASE_TOML + 'docker_image = "ghcr.io/org/img:1"\n', changes={"environment/Dockerfile": None}
    )
    (task,) = load_tasks(files)
    assert task.docker_image == "ghcr.io/org/img:1"


def test_the_solution_is_optional() -> None:
    (task,) = load_tasks(tree(changes={"solution/solve.sh": None}))
    assert not task.has_solution and task.solution == {}


def test_the_whole_solution_directory_is_kept() -> None:
    files = {"solution/solve.py": b"print(1)\n", "solution/data/input.csv": b"a,b\n"}
    (task,) = load_tasks(tree(changes=files))
    assert task.solution == {
        "data/input.csv": b"a,b\n",
        "solve.py": b"print(1)\n",
        "solve.sh": b"#!/bin/bash\ntrue\n",
    }


def test_a_solution_name_no_file_system_takes_is_refused() -> None:
    long = "x" * (MAX_NAME_BYTES + 1)
    message = refusal(tree(changes={f"solution/{long}/a.txt": b"1"}))
    assert f"task t1: solution/{long}/a.txt: the name" in message
    assert f"is {MAX_NAME_BYTES + 1} bytes; a file system takes at most 255" in message
    assert load_tasks(tree(changes={f"solution/{'x' * MAX_NAME_BYTES}": b"1"}))


def test_a_solution_path_linux_cannot_open_is_refused() -> None:
    deep = "/".join(["d" * 200] * 21) + "/a.txt"
    message = refusal(tree(changes={f"solution/{deep}": b"1"}))
    assert f"task t1: solution/{deep[:40]}...: the path is 4236 bytes" in message
    assert "past the 4095 Linux takes; nest it less deeply" in message


def test_tests_and_solution_past_what_a_trial_carries_are_refused() -> None:
    # What the tree() files and these two names add, counted as the check counts them.
    names = 6 * sum(len(n) for n in ("test.sh", "solve.sh", "data.bin", "data.bin"))
    small = len(b"#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n#!/bin/bash\ntrue\n")
    room = MAX_CARRIED_BYTES - names - small
    fits = {"tests/data.bin": b"x" * (room // 2), "solution/data.bin": b"x" * (room - room // 2)}
    assert load_tasks(tree(changes=fits))
    past = {**fits, "solution/data.bin": fits["solution/data.bin"] + b"x"}
    message = refusal(tree(changes=past))
    assert f"task t1: tests/ and solution/ come to {MAX_CARRIED_BYTES + 1} bytes" in message
    assert f"examhall carries at most {MAX_CARRIED_BYTES} of them into a trial" in message


def test_an_empty_or_non_utf8_instruction_is_refused() -> None:
    assert "instruction.md is empty" in refusal(tree(changes={"instruction.md": b"\n \n"}))
    assert "instruction.md is not UTF-8" in refusal(tree(changes={"instruction.md": b"\xff\xfe"}))


def test_leading_canary_lines_are_stripped_from_the_instruction() -> None:
    text = b"<!-- BENCHMARK DATA canary GUID 1234 -->\n\nDo it.\n"
    assert load_tasks(tree(changes={"instruction.md": text}))[0].instruction == "Do it.\n"


def test_a_compose_environment_is_refused() -> None:
    message = refusal(tree(changes={"environment/docker-compose.yaml": b"services: {}\n"}))
    assert "task t1: environment/docker-compose.yaml: a multi-container" in message


# Malformed task.toml.


def test_bad_toml_syntax_is_refused_naming_task_and_field() -> None:
    message = refusal(tree(BASE_TOML.replace("timeout_sec = 60.0", "timeout_sec = ")))
    assert message.startswith("task t1: task.toml [verifier].timeout_sec (line 7)")
    assert "is not valid TOML" in message


def test_a_wrong_type_is_refused_naming_task_and_field() -> None:
    message = refusal(
        tree(BASE_TOML.replace("timeout_sec = 60.0", 'timeout_sec = "soon"'), task="jq-filter")
    )
    assert message.startswith(
        "task jq-filter: task.toml [verifier].timeout_sec: Input should be a valid number"
    )


@pytest.mark.parametrize(
    ("toml", "field"),
    [
        ("[agent]\nuser = true\n", "[agent].user"),
        ("[environment]\ncpus = true\n", "[environment].cpus"),
        ('[environment]\nos = "macos"\n', "[environment].os"),
        ('[environment]\nnetwork_mode = "offline"\n', "[environment].network_mode"),
        ('[environment]\nmemory = "2GB"\n', "[environment].memory"),
        ("[environment]\nenv = { A = 1 }\n", "[environment.env].A"),
        ('[task]\nname = "no-org"\n', "[task].name"),
        ("schema_version = 1.0\n", "schema_version"),
        ("[[steps]]\nname = 3\n", "steps[0].name"),
    ],
)
def test_bad_values_are_refused_by_field(toml: str, field: str) -> None:
    message = refusal(tree(toml))
    assert message.startswith(f"task t1: task.toml {field}: "), message


def test_unknown_keys_are_ignored() -> None:
    files = with_toml("future_key = 1\n[environment.future]\nx = 2\n[brand_new]\ny = 3\n")
    files["t1/task.toml"] = files["t1/task.toml"].replace(
        b"[agent]", b"[agent]\nsomething_new = 'x'"
    )
    (task,) = load_tasks(files)
    assert task.limits.memory_bytes == 512 * MiB


def test_memory_and_storage_in_the_legacy_spelling_are_bytes() -> None:
    config = parse_task_config(b'[environment]\nmemory = "2G"\nstorage = "512M"\n')
    limits, problems = map_limits(config)
    assert problems == []
    assert limits.memory_bytes == 2 * 1024 * MiB
    assert limits.storage_bytes == 512 * MiB
    mismatch = refusal(tree('[environment]\nmemory = "2G"\nmemory_mb = 100\n'))
    assert "task.toml [environment]: memory = '2G' (2048 MB) and memory_mb = 100" in mismatch


def test_defaults_follow_harbor() -> None:
    limits, problems = map_limits(parse_task_config(b""))
    assert problems == []
    assert limits == TaskLimits(agent_timeout_s=None, verifier_timeout_s=600.0, network="public")
    assert limits.build_timeout_s == 600.0 and limits.cpus is None


# What examhall cannot honour.


@pytest.mark.parametrize(
    ("toml", "field", "why"),
    [
        ('[environment]\nos = "windows"\n', "[environment].os", "Linux containers only"),
        ("[environment]\ngpus = 1\n", "[environment].gpus", "no GPUs"),
        ('[environment]\ngpu_types = ["H100"]\n', "[environment].gpu_types", "no GPUs"),
        (
            '[environment.tpu]\ntype = "v6e"\ntopology = "2x4"\n',
            "[environment.tpu]",
            "no TPUs",
        ),
        (
            '[environment]\nnetwork_mode = "allowlist"\nallowed_hosts = ["pypi.org/simple"]\n',
            "[environment].allowed_hosts",
            "is not a host name",
        ),
        ('[agent]\nnetwork_mode = "public"\n', "[agent].network_mode", "never reaches"),
        ('[agent]\nuser = "root"\n', "[agent].user = 'root'", "never runs the agent as root"),
        ("[agent]\nuser = 0\n", "[agent].user = 0", "never runs the agent as root"),
        ('[agent]\nuser = "0:0"\n', "[agent].user = '0:0'", "never runs the agent as root"),
        ('[verifier]\nuser = "nobody"\n', "[verifier].user = 'nobody'", "as root"),
        ('[agent]\nuser = "a b"\n', "[agent].user = 'a b'", "not a user name"),
        (
            '[metadata.examhall]\nverifier = "lax"\n',
            "[metadata.examhall].verifier = 'lax'",
            'give "strict"',
        ),
        (
            '[verifier]\nenvironment_mode = "separate"\n',
            "[verifier].environment_mode",
            "separate verifier environment",
        ),
        (
            "[verifier.environment]\ncpus = 1\n",
            "[verifier].environment_mode",
            "separate verifier environment",
        ),
        ('[[verifier.collect]]\ncommand = "true"\n', "[[verifier.collect]]", "compose"),
        ('[[steps]]\nname = "one"\n', "[[steps]] (1 steps)", "single-step tasks only"),
        (
            '[[environment.mcp_servers]]\nname = "m"\nurl = "http://m:8000/mcp"\n',
            "[[environment.mcp_servers]] (m)",
            "no MCP server",
        ),
        ('[environment]\nskills_dir = "/skills"\n', "[environment].skills_dir", "no skills"),
        (
            '[environment.healthcheck]\ncommand = "true"\n',
            "[environment.healthcheck]",
            "nothing to wait for",
        ),
        (
            '[environment.env]\nTOKEN = "${TOKEN}"\n',
            "[environment.env].TOKEN",
            "must not read the control plane's environment",
        ),
        (
            '[verifier.env]\nKEY = "${KEY:-x}"\n',
            "[verifier.env].KEY",
            "must not read the control plane's environment",
        ),
        (
            '[solution.env]\nKEY = "${HOME}"\n',
            "[solution.env].KEY",
            "must not read the control plane's environment",
        ),
        ('[environment.env]\nLD_PRELOAD = "/x.so"\n', "[environment.env].LD_PRELOAD", "worker"),
        ('[environment.env]\n"A-B" = "x"\n', "[environment.env].A-B", "not a variable name"),
        ('[environment]\nworkdir = "app"\n', "[environment].workdir", "absolute path"),
        ('[environment]\nworkdir = "/tests"\n', "[environment].workdir", "sandbox's own"),
        ("[agent]\ntimeout_sec = -1\n", "[agent].timeout_sec", "positive"),
        (
            f"[verifier]\ntimeout_sec = {MAX_TIMEOUT_S * 2}\n",
            "[verifier].timeout_sec",
            f"cap is {MAX_TIMEOUT_S:g} s",
        ),
        (
            f"[environment]\nbuild_timeout_sec = {MAX_TIMEOUT_S + 1}\n",
            "[environment].build_timeout_sec",
            "cap",
        ),
        (f"[environment]\ncpus = {MAX_CPUS * 2}\n", "[environment].cpus", f"{MAX_CPUS:g} cpus"),
        ("[environment]\ncpus = 0\n", "[environment].cpus", "between"),
        (
            f"[environment]\nmemory_mb = {MAX_MEMORY_BYTES // MiB + 1}\n",
            "[environment].memory_mb",
            f"cap for memory is {MAX_MEMORY_BYTES // MiB} MB",
        ),
        ("[environment]\nmemory_mb = 8\n", "[environment].memory_mb", "at least 64 MB"),
        (
            f"[environment]\nstorage_mb = {MAX_STORAGE_BYTES // MiB + 1}\n",
            "[environment].storage_mb",
            "cap for storage",
        ),
    ],
)
def test_what_examhall_cannot_honour_is_refused_with_task_field_and_reason(
    toml: str, field: str, why: str
) -> None:
    message = refusal(tree(toml, task="needs-more"))
    lines = [line for line in message.splitlines() if f"task.toml {field}" in line]
    assert lines, message
    assert lines[0].startswith(f"task needs-more: task.toml {field}")
    assert why in lines[0], lines[0]


def test_every_problem_of_a_task_is_listed_at_once() -> None:
    files = tree('[environment]\nos = "windows"\ngpus = 2\n', changes={"instruction.md": None})
    with pytest.raises(HarborTaskError) as caught:
        load_tasks(files)
    error = caught.value
    assert [p.split(":", 2)[1].strip() for p in error.problems] == [
        "task.toml [environment].os = 'windows'",
        "task.toml [environment].gpus = 2",
        "instruction.md is missing; a Harbor task needs instruction.md, tests/test.sh, "
        "environment/Dockerfile",
    ]
    assert isinstance(error, SuiteError)


def test_problems_of_several_tasks_are_listed_together() -> None:
    files = {
        **tree("[environment]\ngpus = 1\n", task="a"),
        **tree(task="b", changes={"tests/test.sh": None}),
    }
    message = refusal(files)
    assert "task a: task.toml [environment].gpus" in message
    assert "task b: tests/test.sh is missing" in message


def test_what_examhall_maps_is_accepted() -> None:
    config = parse_task_config(
        b'[agent]\nuser = "agent"\nnetwork_mode = "no-network"\n'
        b'[verifier]\nuser = "root"\nenvironment_mode = "shared"\n'
        b'[environment]\nnetwork_mode = "no-network"\ngpus = 0\nworkdir = "/srv/app/"\n'
        b'env = { MODE = "test", PATTERN = "a${b}c" }\n'
    )
    limits, problems = map_limits(config)
    assert problems == []
    assert limits.workdir == "/srv/app"
    assert limits.agent_user == "agent" and limits.strict_verifier is False
    # Only a whole-value ${VAR} is a host template in Harbor; an embedded one is literal.
    assert limits.environment_env == {"MODE": "test", "PATTERN": "a${b}c"}


def test_the_network_a_task_asks_for_is_resolved_as_harbor_does_and_kept() -> None:
    # Harbor's default is public: a task that leaves the key out (nearly all do) asks for the
    # internet, and runs offline here; the report says so (tests/docker/test_task_suites.py).
    config = parse_task_config(b"[environment]\ncpus = 1\n")
    assert config.environment.effective_network_mode == "public"
    limits, problems = map_limits(config)
    assert problems == [] and limits.wanted_network == "public"
    # An explicit network_mode wins over allow_internet, as in Harbor.
    explicit = parse_task_config(
        b'[environment]\nnetwork_mode = "no-network"\nallow_internet = true\n'
    )
    limits, problems = map_limits(explicit)
    assert problems == [] and limits.wanted_network is None
    exported = map_limits(parse_task_config(b"[environment]\nallow_internet = true\n"))
    assert exported[1] == [] and exported[0].wanted_network == "public"
    listed = parse_task_config(
        b'[environment]\nnetwork_mode = "allowlist"\nallowed_hosts = ["PyPI.org", "*.x.io"]\n'
    )
    limits, problems = map_limits(listed)
    assert problems == [] and limits.allowed_hosts == ("pypi.org", "*.x.io")
    assert limits.wanted_network == "allowlist: pypi.org, *.x.io"
    # An allowlist of nothing reaches nothing.
    empty = parse_task_config(b'[environment]\nnetwork_mode = "allowlist"\nallowed_hosts = []\n')
    assert map_limits(empty)[0].wanted_network is None


@pytest.mark.parametrize(
    ("toml", "user", "strict"),
    [
        ('[agent]\nuser = "agent"\n', "agent", False),
        ("[agent]\nuser = 1000\n", "1000", False),
        ('[agent]\nuser = "dev:staff"\n', "dev", False),
        ("", None, False),
        ('[metadata.examhall]\nverifier = "strict"\n', None, True),
        ('[metadata.examhall]\nverifier = "harbor"\n', None, False),
    ],
)
def test_the_agent_user_and_the_verifier_a_task_asks_for_are_kept(
    toml: str, user: str | None, strict: bool
) -> None:
    limits, problems = map_limits(parse_task_config(toml.encode()))
    assert problems == []
    assert (limits.agent_user, limits.strict_verifier) == (user, strict)
