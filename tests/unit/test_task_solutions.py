"""Who gets a task's reference solution, and what a scripted model replays of it: the whole
solution/ directory for the oracle and the scripted models, nothing for any other model.
(tests/docker/test_task_suites.py runs both in real trials.)"""

from __future__ import annotations

import base64

import pytest

from sandbox.faux import FauxReply
from sandbox.protocol import SCRIPTED_PROVIDERS, TaskSpec, runs_solution
from sandbox.task_case import task_case
from service.suites.harbor import load_tasks, task_spec

SOLUTION = {
    "solve.sh": b"#!/bin/bash\npython3 /solution/solve.py\n",
    "solve.py": b"open('answer.txt', 'w').write('42')\n",
    "data/answer.txt": b"42\n",
}
TOML = b'[verifier]\ntimeout_sec = 30\n\n[solution.env]\nGREETING = "it\'s me"\n'


def task_files() -> dict[str, bytes]:
    files = {
        "t/task.toml": TOML,
        "t/instruction.md": b"Write 42 to answer.txt.\n",
        "t/environment/Dockerfile": b"FROM debian:bookworm-slim\n",
        "t/tests/test.sh": b"echo 1 > /logs/verifier/reward.txt\n",
    }
    return files | {f"t/solution/{name}": data for name, data in SOLUTION.items()}


@pytest.mark.parametrize(
    ("agent", "provider", "gets"),
    [
        ("oracle", "", True),
        (None, "simulated", True),
        (None, "faux", True),
        ("nop", "", False),
        ("nop", "simulated", False),
        (None, "openai", False),
        (None, "fakeai", False),
        # An installed (pip or catalogue) agent, under a scripted model too.
        ("installed", "simulated", False),
        ("installed", "faux", False),
        ("installed", "openai", False),
    ],
)
def test_only_the_oracle_and_the_scripted_models_get_the_whole_solution(
    agent: str | None, provider: str, gets: bool
) -> None:
    installed = agent == "installed"
    builtin = None if installed else agent
    assert runs_solution(builtin, provider, installed=installed) is gets
    (task,) = load_tasks(task_files())
    spec = task_spec(task, agent=builtin, provider=provider, workdir=None, installed=installed)
    if gets:
        assert spec.solution is not None
        decoded = {name: base64.b64decode(data) for name, data in spec.solution.items()}
        assert decoded == SOLUTION
        assert spec.solution_env == {"GREETING": "it's me"}
    else:
        assert spec.solution is None and spec.solution_env == {}
    # The verifier's files travel either way: the root supervisor keeps them.
    assert spec.tests


def test_the_scripted_providers_are_the_built_in_ones() -> None:
    from service.providers import BUILT_IN

    assert set(BUILT_IN) == SCRIPTED_PROVIDERS


def test_a_scripted_model_replays_solve_sh_from_solution_in_the_working_directory() -> None:
    encoded = {name: base64.b64encode(data).decode() for name, data in SOLUTION.items()}
    spec = TaskSpec(
        name="t",
        instruction="Write 42.",
        solution=encoded,
        solution_env={"GREETING": "it's me"},
        workdir="/app",
    )
    steps = task_case(spec).scripts["solution"]
    assert isinstance(steps[0], FauxReply)
    ((tool, arguments),) = steps[0].tool_calls
    assert tool == "bash"
    assert arguments["command"] == (
        "export GREETING='it'\"'\"'s me'\ncd /app && bash /solution/solve.sh\n"
    )


def test_without_solve_sh_there_is_nothing_to_replay() -> None:
    spec = TaskSpec(name="t", instruction="x", solution={"solve.py": "eA=="})
    assert "solution" not in task_case(spec).scripts
    assert "solution" not in task_case(TaskSpec(name="t", instruction="x")).scripts
