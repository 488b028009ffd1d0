"""`examhall check-tasks DIR`: run every task with the oracle and the nop agent, and give
each task a verdict with its cause.

A sound task passes with its reference solution and fails when nothing was done. One that
fails with the oracle (its environment does not build, it has no solution, its verifier or
its solution is wrong, or it needs what examhall does not give: root, the network) or
passes with nop (its verifier checks nothing the agent did) would make any agent's score
meaningless, so it is reported broken, with why and the trial to open.

A task whose tests/test.sh runs a file from the agent's workspace, or git on the agent's
repository, is warned about too (service/cli/verifier_scan.py): the verifier runs as root, so
a reward the agent's file or its repository's configuration can write is no measurement.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from examhall import ApiError, Client
from service.cli.connection import connect, failure
from service.cli.local import local_control_plane
from service.cli.progress import watch
from service.cli.task_verdicts import (
    BUILD_ERROR,
    NO_LOGS,
    NOP,
    ORACLE,
    BuildFailure,
    TaskVerdict,
    TrialLogs,
    TrialRow,
    job_build_failure,
    last_attempts,
    verdict,
)
from service.cli.verifier_scan import workspace_findings
from service.report.build import tasks_counted
from service.store.db import database_url
from service.suites import SuiteError, shipped_dir
from service.suites.archives import ArchiveError
from service.suites.harbor import HarborTaskError, load_suite, read_tree, shipped_task_suites


class CheckError(Exception):
    """Input check-tasks cannot run: the message says what to change."""


def suite_dir(suite: str) -> Path | None:
    """The directory of the tasks: the one given, or a shipped task suite's in this
    checkout's evals/ (the server ships the same); None for an uploaded suite's id."""
    if Path(suite).is_dir():
        return Path(suite)
    if suite in shipped_task_suites():
        return shipped_dir() / suite
    return None


@dataclass(frozen=True)
class LocalTasks:
    """A directory's tasks, read as the control plane reads an upload (service/suites/harbor/
    suite.py's from_archive), so the ids are the ones its jobs use."""

    solutions: dict[str, bool]  # task id -> whether it has solution/solve.sh
    refused: dict[str, list[str]]  # task id -> why it does not load (it runs no trial)

    @property
    def ids(self) -> list[str]:
        return sorted([*self.solutions, *self.refused])


def local_tasks(directory: Path) -> LocalTasks:
    try:
        loaded = load_suite(read_tree(directory), require_one=False)
    except HarborTaskError as exc:
        if not (directory / "task.toml").is_file():
            raise CheckError(f"{directory} is not a suite of Harbor tasks:\n{exc}") from None
        # One task at the directory's root, which does not load: its row says why.
        return LocalTasks({}, {directory.resolve().name: exc.problems})
    except SuiteError as exc:
        raise CheckError(f"{directory} is not a suite of Harbor tasks:\n{exc}") from None
    return LocalTasks({task.id: task.has_solution for task in loaded.tasks}, loaded.refused)


def names(option: str, text: str | None) -> list[str]:
    found = [name.strip() for name in (text or "").split(",") if name.strip()]
    if text is not None and not found:
        raise CheckError(f"{option} names no task; give task ids separated by commas.")
    return found


def selection(known: list[str] | None, cases: list[str], exclude: list[str]) -> list[str] | None:
    """The tasks to check (None: all of them, as the server lists them). A name that is no
    task is an error, so that a typo never checks less than was meant."""
    if known is None:
        if exclude:
            raise CheckError(
                "--exclude needs the suite's task list, which only a directory or a shipped "
                "suite's name gives; give the directory, or name the tasks with --cases."
            )
        return cases or None
    unknown = [name for name in [*cases, *exclude] if name not in known]
    if unknown:
        raise CheckError(
            f"No task named {', '.join(unknown)} in the suite; its tasks: {', '.join(known)}."
        )
    picked = [task for task in (cases or known) if task not in exclude]
    if not picked:
        raise CheckError("--cases and --exclude leave no task to check.")
    if not cases and not exclude:
        return None
    return picked


def job_body(
    suite: str,
    rounds: int,
    cases: list[str] | None = None,
    egress: str | None = None,
    concurrency: int | None = None,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "suite": suite,
        "variants": {NOP: {"agent": NOP}, ORACLE: {"agent": ORACLE}},
        "baseline": NOP,
        "rounds": rounds,
    }
    if cases is not None:
        body["cases"] = cases
    if egress is not None:
        # The box's policy the tasks that ask for a network run under; the server checks
        # the name (and the team's right to it) and refuses the job otherwise.
        body["egress"] = egress
    if concurrency is not None:
        body["concurrency"] = concurrency
    return body


@dataclass
class Checked:
    """What the check's jobs left: every trial, and the tasks whose environment ended a
    job before any trial ran (control planes older than main's preparer)."""

    tasks: list[str] = field(default_factory=list)
    trials: list[dict[str, Any]] = field(default_factory=list)
    builds: dict[str, BuildFailure] = field(default_factory=dict)


def run_jobs(
    client: Client,
    suite: str,
    rounds: int,
    cases: list[str] | None,
    egress: str | None = None,
    concurrency: int | None = None,
) -> Checked:
    """Run the oracle and nop on the tasks. A job that a task's build ended is submitted again
    without that task (its built environments are cached), so every task gets a verdict."""
    checked = Checked()
    while True:
        job = client.submit(job_body(suite, rounds, cases, egress, concurrency))
        print(f"Submitted {job.id}: {job.planned_trials} trials.", file=sys.stderr)
        done = watch(client, job.id)
        planned: list[str] = list(done.spec.get("cases") or cases or [])
        checked.tasks += [task for task in planned if task not in checked.tasks]
        checked.trials += [trial.model_dump(mode="json") for trial in client.trials(job.id)]
        if done.status == "cancelled":
            raise CheckError(f"Job {job.id} was cancelled; run the check again.")
        error = done.error
        if not error:
            return checked
        failure = job_build_failure(error, planned, job.id)
        if failure is None:
            raise CheckError(f"Job {job.id} did not run: {error}")
        checked.builds[failure.task] = failure
        cases = [task for task in planned if task != failure.task]
        if not cases:
            return checked
        print(
            f"examhall: the environment of task {failure.task} did not build; checking the "
            f"other {tasks_counted(len(cases))} in a new job.",
            file=sys.stderr,
        )


def oracle_logs(client: Client, trial: TrialRow) -> TrialLogs:
    """What a failed oracle trial left: its solution's output, verifier log and events."""

    def text(name: str) -> str:
        if name not in trial.artifacts:
            return ""
        return client.artifact(trial.id, name).decode("utf-8", "replace")

    events = [
        str(e.payload.get("detail", ""))
        for e in client.events(trial.id, limit=10_000)
        if e.type == "lifecycle"
    ]
    solution = "\n".join(text(name) for name in ("agent.stdout", "agent.stderr"))
    return TrialLogs(solution=solution, verifier=text("verifier.log"), events=events)


def verdicts(
    client: Client,
    checked: Checked,
    *,
    solutions: Mapping[str, bool],
    warnings: Mapping[str, list[str]],
    where: Callable[[str], str],
) -> list[TaskVerdict]:
    last = last_attempts(checked.trials)
    results = []
    for task in sorted(checked.tasks):
        oracle, nop = last.get((task, ORACLE)), last.get((task, NOP))
        logs = NO_LOGS
        if oracle is not None and oracle.outcome != "passed" and oracle.error_kind != BUILD_ERROR:
            logs = oracle_logs(client, oracle)
        ids = [t.id for t in (oracle, nop) if t is not None]
        results.append(
            verdict(
                task,
                oracle,
                nop,
                oracle_logs=logs,
                has_solution=solutions.get(task),
                build=checked.builds.get(task),
                warnings=warnings.get(task, []),
                where={trial_id: where(trial_id) for trial_id in ids},
            )
        )
    return results


def render(results: list[TaskVerdict]) -> str:
    """The table: a row a task, and under a task that is not sound its detail, indented."""
    width = max([len("TASK"), *(len(r.task) for r in results)])
    oracle = max([len("ORACLE"), *(len(r.oracle) for r in results)])
    nop = max([len("NOP"), *(len(r.nop) for r in results)])
    lines = [f"{'TASK':<{width}}  {'ORACLE':<{oracle}}  {'NOP':<{nop}}  {'VERDICT':<7}  CAUSE"]
    for r in results:
        lines.append(
            f"{r.task:<{width}}  {r.oracle:<{oracle}}  {r.nop:<{nop}}  {r.verdict:<7}  {r.cause}"
        )
        lines += [f"    {line}" for line in r.detail.splitlines() if r.verdict != "sound"]
    broken = [r.task for r in results if r.verdict == "broken"]
    lines.append(
        f"{len(broken)} of {tasks_counted(len(results))} broken"
        + (f": {', '.join(broken)}" if broken else "")
    )
    return "\n".join(lines) + "\n"


def cmd_check_tasks(args: argparse.Namespace) -> int:
    """Exit 0 when no task is broken, 1 when some are, 2 when the check could not run."""
    try:
        directory = suite_dir(args.suite)
        local = local_tasks(directory) if directory is not None else LocalTasks({}, {})
        # --cases and --exclude pick among every task, those that do not load included.
        picked = selection(
            local.ids if directory is not None else None,
            names("--cases", args.cases),
            names("--exclude", args.exclude),
        )
    except CheckError as exc:
        print(f"examhall: {exc}", file=sys.stderr)
        return 2
    solutions = local.solutions
    refused = {t: why for t, why in local.refused.items() if picked is None or t in picked}
    for task, problems in refused.items():
        print(f"examhall: task {task} does not load; it is checked no further:", file=sys.stderr)
        for problem in problems:
            print(f"    {problem}", file=sys.stderr)
    # The tasks the job runs: those picked that load (all of them when nothing is left out).
    cases = picked if not local.refused else [t for t in picked or local.ids if t in solutions]
    warnings: dict[str, list[str]] = {}
    if Path(args.suite).is_dir():
        for task, found in workspace_findings(Path(args.suite)).items():
            if task == "" and len(solutions) == 1:
                task = next(iter(solutions))
            if cases is None or task in cases:
                warnings[task] = found
                for warning in found:
                    print(f"examhall: {warning}", file=sys.stderr)
    plane: AbstractContextManager[Client] = (
        local_control_plane() if args.local else nullcontext(connect(args))
    )
    rows = [verdict(task, None, None, refused=problems) for task, problems in refused.items()]
    if cases == []:  # every task picked fails to load: nothing to upload or run
        return _show(rows, as_json=args.json)
    try:
        with plane as client:
            suite = args.suite
            if Path(suite).is_dir():
                suite = client.upload(suite).id
                print(f"Uploaded {args.suite} as suite {suite}.", file=sys.stderr)
            checked = run_jobs(client, suite, args.rounds, cases, args.egress, args.concurrency)
            base = str(client.http.base_url).rstrip("/")

            def where(trial_id: str) -> str:
                if args.local:
                    # This control plane stops with the command; its store keeps the trials.
                    return (
                        f"{trial_id} (`examhall serve` over {database_url()} shows "
                        f"/ui/trials/{trial_id})"
                    )
                return f"{base}/ui/trials/{trial_id}"

            results = verdicts(client, checked, solutions=solutions, warnings=warnings, where=where)
            results = sorted([*results, *rows], key=lambda row: row.task)
    except (ApiError, ArchiveError, CheckError) as exc:
        print(f"examhall: {exc}", file=sys.stderr)
        return 2
    except httpx.TransportError as exc:
        print(
            f"{failure(args, exc)} Or check with --local."
            if not args.local
            else f"examhall: the local control plane stopped answering ({exc}); see above.",
            file=sys.stderr,
        )
        return 2
    return _show(results, as_json=args.json)


def _show(results: list[TaskVerdict], *, as_json: bool) -> int:
    """Print the verdicts; the exit status: 1 when a task is broken."""
    if as_json:
        print(json.dumps([r.model_dump() for r in results], indent=2))
    else:
        print(render(results), end="")
    return 1 if any(r.verdict == "broken" for r in results) else 0


EPILOG = """\
verdicts: sound (passes with the oracle, fails with nop), broken (with its cause: does not
load, build failed at step N, no reference solution, needs network, needs root, read-only
file system, verifier error, fails with its reference solution, passes with nop), warning
(sound, but tests/test.sh seems to run what the agent controls as root: a file of its
workspace, its package as a module, git on its repository). A task that does
not load gets its row; the others run.

exit status: 0 no task is broken (warnings may be listed), 1 some task is broken, 2 the
check could not run (bad input, a task name that is no task, the server unreachable or
refusing, a job that could not run)."""


def add_command(
    sub: argparse._SubParsersAction[argparse.ArgumentParser],
    connection: Any,
) -> None:
    check = sub.add_parser(
        "check-tasks",
        help="run a task suite with the oracle and nop agents and list the broken tasks",
        description=__doc__,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    check.add_argument("suite", help="a directory of Harbor tasks, or a suite the server has")
    check.add_argument("--rounds", type=int, default=1, help="runs of each agent per task")
    check.add_argument("--cases", help="comma-separated task ids to check (default: all)")
    check.add_argument("--exclude", help="comma-separated task ids to leave out")
    check.add_argument(
        "--egress",
        metavar="POLICY",
        help="the box's egress policy (EXAMHALL_EGRESS_POLICIES) that tasks asking for a "
        "network run under (default: offline, which reaches nothing)",
    )
    check.add_argument(
        "--concurrency",
        type=int,
        help="at most this many of the check's trials at once (at most the team's cap)",
    )
    check.add_argument(
        "--json",
        action="store_true",
        help="print a JSON list, one object a task: task, verdict, cause, oracle, nop, "
        "trials, detail",
    )
    check.add_argument(
        "--local", action="store_true", help="start a control plane of its own for the check"
    )
    connection(check)
    check.set_defaults(func=cmd_check_tasks)
