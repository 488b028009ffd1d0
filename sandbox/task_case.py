"""A task with its own environment, as the worker runs it: a case whose judge is the
verifier that the root supervisor runs afterwards, and the two built-in agents.

`oracle` runs the reference solution (every sound task must pass with it) and `nop` does
nothing (every sound task must fail with it): together they check a task, not an agent.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable

from sandbox.agent import AgentFailure
from sandbox.external import run_command
from sandbox.faux import bash, text
from sandbox.protocol import Event, LifecycleEvent, TaskSpec
from sandbox.suite import AgentRun, Case, Judge
from sandbox.workspace import task_workdir

BUILTIN_AGENTS = ("oracle", "nop")
SOLVE_SCRIPT = "/solution/solve.sh"
OUTPUT_LIMIT = 4 * 1024 * 1024
# A task trial is made of a shell's work; the file tools come along as for any case.
TASK_TOOLS = ("bash", "read", "write", "edit", "ls", "find", "grep")


def _scored_by_verifier(run: AgentRun) -> float:
    raise RuntimeError("a task is scored by its verifier, after the worker's run")


VERIFIER = Judge(name="verifier", fn=_scored_by_verifier)


def solve_command(task: TaskSpec) -> str:
    """The bash call a scripted model replays: what the oracle runs, where it runs it. The
    root supervisor has put the whole solution/ in /solution (sandbox/supervisor.py), so a
    solve.sh that runs /solution/solve.py or reads a data file beside it finds them."""
    # The oracle gets [solution].env from its environment; a replay, from its command.
    exports = "".join(f"export {k}={shlex.quote(v)}\n" for k, v in task.solution_env.items())
    workdir = shlex.quote(task_workdir(task.workdir))
    return f"{exports}cd {workdir} && bash {SOLVE_SCRIPT}\n"


def task_case(task: TaskSpec) -> Case:
    """The case the worker runs. The faux and simulated models replay the reference solution
    as one bash call; the control plane sends the solution only for those models."""
    scripts = {}
    if "solve.sh" in (task.solution or {}):
        scripts["solution"] = [bash(solve_command(task)), text("Done.")]
    return Case(
        id=task.name, input=task.instruction, judges=[VERIFIER], tools=TASK_TOOLS, scripts=scripts
    )


def run_builtin(
    agent: str,
    *,
    env: dict[str, str],
    cwd: str,
    timeout_s: float,
    emit: Callable[[Event], None],
    artifact: Callable[[str, bytes], None],
) -> None:
    """Run `oracle` or `nop` as the sandbox user. The oracle runs `bash /solution/solve.sh`
    in the task's working directory, as Harbor's does, with the whole solution/ beside it.
    The solution's exit code is recorded, not judged: the verifier decides, as Harbor's
    oracle does."""
    if agent == "nop":
        emit(LifecycleEvent(step="builtin_agent", detail="nop: does nothing"))
        return
    if agent != "oracle":
        raise AgentFailure("agent_error", f"Unknown built-in agent {agent!r}.")
    emit(LifecycleEvent(step="builtin_agent", detail=f"oracle: bash {SOLVE_SCRIPT}"))
    done = run_command(
        ["bash", SOLVE_SCRIPT],
        cwd=cwd,
        env=env,
        timeout_s=timeout_s,
        missing="The oracle needs bash, which the image lacks.",
        late=f"The reference solution ran past {timeout_s:g} s.",
    )
    artifact("agent.stdout", done.stdout[-OUTPUT_LIMIT:])
    artifact("agent.stderr", done.stderr[-OUTPUT_LIMIT:])
    emit(LifecycleEvent(step="builtin_agent", detail=f"solve.sh exited {done.returncode}"))
