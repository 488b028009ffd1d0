"""`examhall check-tasks DIR`: run every task with the oracle and the nop agent, and list the
broken ones.

A sound task passes with its reference solution and fails when nothing was done. One that
fails with the oracle (its verifier or its solution is wrong, or it needs what examhall
does not give: root, the network) or passes with nop (its verifier checks nothing the
agent did) would make any agent's score meaningless, so it is reported, not run.

A task whose tests/test.sh runs a file from the agent's workspace (executes, sources or
hands to an interpreter a path under the working directory) is warned about too: the
verifier runs as root, so a reward the agent's file can write is no measurement. That scan
is a heuristic over the script's text, neither complete nor proof.
"""

from __future__ import annotations

import argparse
import re
import shlex
import sys
from collections.abc import Iterable, Mapping
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from service.archives import ArchiveError
from service.cli.client import ApiError, Client
from service.cli.local import local_control_plane

ORACLE, NOP = "oracle", "nop"
# Where an agent's files are when the task names no WORKDIR: Harbor's and examhall's.
WORKSPACES = ("/app", "/workspace")
_RUNNERS = {
    "bash",
    "sh",
    "dash",
    "zsh",
    "source",
    ".",
    "exec",
    "python",
    "python3",
    "node",
    "perl",
    "ruby",
}
_WORKDIR = re.compile(r"^\s*WORKDIR\s+(\S+)", re.MULTILINE | re.IGNORECASE)


@dataclass(frozen=True)
class Check:
    task: str
    oracle: str
    nop: str
    problem: str | None  # None: the task is sound


def _how(trial: Mapping[str, Any] | None) -> str:
    if trial is None:
        return "did not run"
    if trial["outcome"] == "error":
        return f"{trial['error_kind']}: {trial['error_message']}"
    return str(trial["outcome"])


def checks(trials: Iterable[Mapping[str, Any]]) -> list[Check]:
    """Each task's verdict from the last attempt of its oracle and nop trials."""
    last: dict[tuple[str, str], Mapping[str, Any]] = {}
    for trial in sorted(trials, key=lambda t: t["attempt"]):
        last[(trial["case_id"], trial["variant"])] = trial
    results = []
    for task in sorted({case for case, _ in last}):
        oracle, nop = last.get((task, ORACLE)), last.get((task, NOP))
        problem = None
        if oracle is None or oracle["outcome"] != "passed":
            problem = (
                f"fails with its reference solution ({_how(oracle)}); check solution/solve.sh "
                "and tests/test.sh (the oracle runs unprivileged and with no network here)"
            )
        elif nop is None or nop["outcome"] == "passed":
            problem = (
                "passes with the nop agent: its verifier does not check what the agent did"
                if nop is not None
                else "its nop trial did not run"
            )
        elif nop["outcome"] != "failed":
            problem = f"the nop agent's run was not scored ({_how(nop)})"
        results.append(Check(task, _how(oracle), _how(nop), problem))
    return results


def render(results: list[Check]) -> str:
    width = max([len("TASK"), *(len(r.task) for r in results)])
    lines = [f"{'TASK':<{width}}  {'ORACLE':<8}  {'NOP':<8}  VERDICT"]
    for r in results:
        oracle = r.oracle if len(r.oracle) <= 8 else "error"
        nop = r.nop if len(r.nop) <= 8 else "error"
        lines.append(f"{r.task:<{width}}  {oracle:<8}  {nop:<8}  {r.problem or 'sound'}")
    broken = [r for r in results if r.problem]
    lines.append(
        f"{len(broken)} of {len(results)} task(s) broken"
        + (f": {', '.join(r.task for r in broken)}" if broken else "")
    )
    return "\n".join(lines) + "\n"


def task_workdirs(task_dir: Path) -> set[str]:
    """The working directories a task's agent may write: its Dockerfile's WORKDIRs, and
    the usual workspaces."""
    found = set(WORKSPACES)
    dockerfile = task_dir / "environment" / "Dockerfile"
    if dockerfile.is_file():
        text = dockerfile.read_text("utf-8", "replace")
        found.update(m.rstrip("/") for m in _WORKDIR.findall(text))
    return found


def runs_agent_files(script: str, workdirs: set[str]) -> list[str]:
    """Lines of a test.sh that look as if they run a file the agent can write: a path under
    `workdirs`, or a relative one (the script starts in the working directory), executed,
    sourced or given to an interpreter. A heuristic: a word-level reading of each line,
    which misses indirection (variables, cd, eval) and may flag a file the task made."""
    found = []
    for number, raw in enumerate(script.splitlines(), start=1):
        line = raw.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        for command in re.split(r"&&|\|\||;|\|", line):
            try:
                words = shlex.split(command)
            except ValueError:
                words = command.split()
            if words and words[0] in ("then", "else", "do", "if", "while", "!"):
                words = words[1:]
            if not words:
                continue
            target = None
            if words[0] in _RUNNERS:
                # The first operand that is not an option; `python3 -m x` runs a module.
                rest = [w for w in words[1:] if not w.startswith("-")]
                if "-m" in words[1:] or "-c" in words[1:] or not rest:
                    continue
                target = rest[0]
            elif "/" in words[0]:
                target = words[0]  # an executed path
            if target is not None and _in_workspace(target, workdirs):
                found.append(f"line {number}: {raw.strip()}")
                break
    return found


def _in_workspace(path: str, workdirs: set[str]) -> bool:
    if path.startswith(("$", "~", "/tests/", "/logs/", "/solution/")):
        return False
    if not path.startswith("/"):
        return True  # relative: the script runs in the task's working directory
    return any(path == w or path.startswith(f"{w}/") for w in workdirs)


def workspace_warnings(suite_dir: Path) -> list[str]:
    """A warning for each task of a directory whose test.sh seems to run the agent's files."""
    warnings = []
    tasks = (
        [suite_dir]
        if (suite_dir / "tests" / "test.sh").is_file()
        else sorted(d for d in suite_dir.iterdir() if (d / "tests" / "test.sh").is_file())
    )
    for task in tasks:
        script = (task / "tests" / "test.sh").read_text("utf-8", "replace")
        for line in runs_agent_files(script, task_workdirs(task)):
            warnings.append(
                f"warning: {task.name}: tests/test.sh runs a file in the agent's workspace as "
                f"root ({line}); the agent can write the reward. Run only files from /tests "
                f"(a heuristic scan of the script's text; check it by reading the script)"
            )
    return warnings


def job_body(suite: str, rounds: int) -> dict[str, Any]:
    return {
        "suite": suite,
        "variants": {NOP: {"agent": NOP}, ORACLE: {"agent": ORACLE}},
        "baseline": NOP,
        "rounds": rounds,
    }


def cmd_check_tasks(args: argparse.Namespace) -> int:
    """Exit 0 when every task is sound, 1 when some are broken, 2 on a usage or server
    error, 4 when the job could not run (an environment that did not build)."""
    plane: AbstractContextManager[Client] = (
        local_control_plane() if args.local else nullcontext(Client(args.server, args.token))
    )
    try:
        with plane as client:
            suite = args.suite
            if Path(suite).is_dir():
                for warning in workspace_warnings(Path(suite)):
                    print(f"examhall: {warning}", file=sys.stderr)
                suite = client.upload_suite(suite)
                print(f"Uploaded {args.suite} as suite {suite}.", file=sys.stderr)
            job = client.submit(job_body(suite, args.rounds))
            print(f"Submitted {job['id']}: {job['planned_trials']} trials.", file=sys.stderr)
            done = client.wait(job["id"])
            if done.get("error"):
                print(f"examhall: job {job['id']} did not run: {done['error']}", file=sys.stderr)
                return 4
            results = checks(client.trials(job["id"]))
    except (ApiError, ArchiveError, httpx.TransportError) as exc:
        print(f"examhall: {exc}", file=sys.stderr)
        return 2
    print(render(results), end="")
    return 1 if any(r.problem for r in results) else 0


def add_command(
    sub: argparse._SubParsersAction[argparse.ArgumentParser],
    connection: Any,
) -> None:
    check = sub.add_parser(
        "check-tasks",
        help="run a task suite with the oracle and nop agents and list the broken tasks",
    )
    check.add_argument("suite", help="a directory of Harbor tasks, or a suite the server has")
    check.add_argument("--rounds", type=int, default=1, help="runs of each agent per task")
    check.add_argument(
        "--local", action="store_true", help="start a control plane of its own for the check"
    )
    connection(check)
    check.set_defaults(func=cmd_check_tasks)
