"""The Inspect side of bench/throughput.py: the smoke suite's trivial work, one sandbox per
sample and epoch.

Each sample asks `mockllm/model` once (as the simulated model answers once per turn), writes
its file into the sandbox (the work examhall's simulated model replays through the write
tool) and is scored by reading the file back from the sandbox (examhall's judge reads the
workspace).
"""

from __future__ import annotations

from pathlib import Path

from inspect_ai import Task, task
from inspect_ai.dataset import Sample
from inspect_ai.scorer import CORRECT, INCORRECT, Score, Scorer, Target, accuracy, scorer
from inspect_ai.solver import Generate, Solver, TaskState, solver
from inspect_ai.util import sandbox

# The smoke suite's case ids, and the file each one's solution leaves.
CASES = {
    "create-greeting": ("hello.txt", "Hello, exam hall!\n"),
    "fix-config": ("config.ini", "[app]\nname = demo\ndebug = false\nport = 8080\n"),
    "count-lines": ("count.txt", "7\n"),
    "notes-in-steps": ("notes.md", "# Notes\ndone\n"),
}


@solver
def replay_solution() -> Solver:
    async def solve(state: TaskState, generate: Generate) -> TaskState:
        state = await generate(state)
        path, content = CASES[str(state.sample_id)]
        await sandbox().write_file(path, content)
        return state

    return solve


@scorer(metrics=[accuracy()])
def file_written() -> Scorer:
    async def score(state: TaskState, target: Target) -> Score:
        path, content = CASES[str(state.sample_id)]
        found = await sandbox().read_file(path)
        return Score(value=CORRECT if found == content else INCORRECT)

    return score


@task
def trivial() -> Task:
    return Task(
        dataset=[Sample(id=case, input=f"Do the {case} task.") for case in CASES],
        solver=replay_solution(),
        scorer=file_written(),
        sandbox=("docker", str(Path(__file__).parent / "compose.yaml")),
    )
