"""Each task's verdict for `examhall check-tasks`, from its oracle and nop trials as the API
returns them and what those trials left (the solution's output, the verifier's log): sound,
or broken with its cause, or sound but warned about.

Only text is read here, nothing is fetched: service/cli/check_tasks.py fetches, so the
causes can be tested on recorded trials.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field

from service.domain.outcomes import COUNTED_AS_FAILED

ORACLE, NOP = "oracle", "nop"
# Main's preparer stores a task whose environment did not build as finished trials of this
# kind (service/scheduler/prepare.py); earlier ones end the whole job with the same text.
BUILD_ERROR = "build_error"
# The lines of a log shown under a broken task: enough for the failing assertion or command.
TAIL_LINES = 10

Verdict = Literal["sound", "broken", "warning"]


class TrialRow(BaseModel):
    """A row of GET /v1/jobs/{id}/trials, with the fields a verdict reads. `error_kind` is a
    plain string: a control plane newer than this command may record kinds it does not
    know (build_error)."""

    model_config = ConfigDict(extra="ignore")

    id: str
    case_id: str
    variant: str
    attempt: int = 1
    status: str
    outcome: str | None = None
    score: float | None = None
    error_kind: str | None = None
    error_message: str | None = None
    failed_step: str | None = None
    artifacts: list[str] = Field(default_factory=list)


@dataclass(frozen=True)
class TrialLogs:
    """What a trial left that says why it failed: the reference solution's output (the
    agent.stdout and agent.stderr artifacts sandbox/task_case.py writes), the verifier's
    (the verifier.log artifact sandbox/supervisor.py writes) and its lifecycle events'
    details (e.g. `solve.sh exited 1`)."""

    solution: str = ""
    verifier: str = ""
    events: list[str] = field(default_factory=list)


NO_LOGS = TrialLogs()


class TaskVerdict(BaseModel):
    """One task's row, as `--json` prints it."""

    task: str
    verdict: Verdict
    cause: str
    oracle: str = Field(description="the oracle trial's outcome, or its error kind")
    nop: str = Field(description="the nop trial's outcome, or its error kind")
    trials: dict[str, str | None] = Field(description="agent -> the trial id to open")
    detail: str = Field(default="", description="log lines and hints, one a line")


@dataclass(frozen=True)
class BuildFailure:
    """A task environment that did not build: from a build_error trial, or from the error
    text that ended a whole job before main's preparer kept the rest running."""

    task: str
    step: str | None  # "Step 3/5 : RUN ..." or "Step 3/5"; None: not a Dockerfile step
    message: str  # the error text, its first line saying where and why
    job: str | None = None  # the job it ended, when it ended one

    @property
    def cause(self) -> str:
        found = re.search(r"Step (\d+)/\d+", self.step or "") or re.search(
            r"failed to build at ['\"]Step (\d+)/\d+", self.message
        )
        if found:
            return f"build failed at step {found.group(1)}"
        if " is refused: " in self.message.split("\n", 1)[0]:
            return "build failed: the environment is refused"
        return "build failed" + (f" ({self.step})" if self.step else "")

    @property
    def detail(self) -> str:
        head, _, rest = self.message.partition("\nLast build output:\n")
        lines = [head.strip()]
        if rest:
            # The tail's last line is the builder's advice (service/environments/builder.py).
            *output, advice = rest.rstrip("\n").split("\n")
            lines += ["last build output:", *_tail(output), advice]
        if self.job is not None:
            lines.append(f"no trial ran: job {self.job} ended at this build")
        return "\n".join(line for line in lines if line)


def job_build_failure(
    error: str, tasks: Iterable[str], job: str | None = None
) -> BuildFailure | None:
    """The task whose environment ended the job, from the job's error text (the preparer's
    EnvironmentBuildError: `The environment of suite S, task T failed to build at 'Step
    ...': ...`), among `tasks`; None when the error names none of them."""
    first = error.split("\n", 1)[0]
    for task in sorted(tasks, key=len, reverse=True):  # "a-b" before "a" when both are
        for verb in ("failed to build", "is refused"):
            if f", task {task} {verb}" in first:
                step = re.search(r"failed to build at (['\"])(Step \d+/\d+.*?)\1: ", first)
                return BuildFailure(task, step.group(2) if step else None, error, job)
    return None


# Name resolution and connection failures as the usual tools print them; each pattern's
# group, where it has one, is the host.
_NETWORK_HOSTS = [
    re.compile(p)
    for p in (
        r"Could not resolve host(?:name)?:? '?([\w.-]+)",  # curl, git; ssh's "hostname"
        r"Temporary failure resolving '([\w.-]+)'",  # apt
        r"unable to resolve host address '([\w.-]+)'",  # wget
        r"Resolving ([\w.-]+) \([\w.-]+\)\.\.\. failed",  # wget
        r"HTTPS?ConnectionPool\(host='([\w.-]+)'",  # pip, requests
        r"getaddrinfo (?:EAI_AGAIN|ENOTFOUND) ([\w.-]+)",  # npm, node
        r"Failed to connect to ([\w.-]+) port",  # curl
        r"Failed to fetch: `https?://([\w.-]+)",  # uv
        # bash's /dev/tcp, nc, python's socket: "HOST: Temporary failure in name resolution"
        r"([A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+): (?:Temporary failure in name resolution"
        r"|Name or service not known)",
    )
]
# pip names no host when it cannot reach its index: its retries print only the path. The
# index is the one its "Looking in indexes:" line names (printed whenever it is not PyPI),
# else PyPI's.
_PIP_RETRY = re.compile(r"Retrying \(Retry\(.*after connection broken by .*'\)?: /simple/")
_PIP_INDEXES = re.compile(r"Looking in indexes: (.+)")
_PIP_DEFAULT_HOST = "pypi.org"
_REFUSED = re.compile(
    r"^(?:agent|verifier) (?P<host>\S+?):\d+ refused: (?P<why>.*), \d+ bytes out, \d+ in$"
)
# A certificate the sandbox does not trust: a TLS-inspecting proxy on the way.
_UNTRUSTED = re.compile(
    r"CERTIFICATE_VERIFY_FAILED|certificate verify failed|SSL certificate problem"
    r"|server certificate verification failed|invalid peer certificate"
)
_NETWORK = re.compile(
    r"Temporary failure in name resolution|Name or service not known|Could not resolve host"
    r"|Temporary failure resolving|Network is unreachable|Failed to establish a new connection"
    r"|unable to resolve host|getaddrinfo (?:EAI_AGAIN|ENOTFOUND)"
    r"|No address associated with hostname|dns error|" + _UNTRUSTED.pattern
)
# Where the verifier wrote in vain: what a read-only mount of the sandbox refuses.
_READ_ONLY = re.compile(r"Read-only file system|\bEROFS\b")
# The solution refused what root may do in Harbor's container: EACCES, EPERM, and EROFS (as
# root the system directories would be writable there; here the root file system is
# read-only for every process, docs/guides/task-suites.md).
_ROOT = re.compile(
    r"Permission denied|Operation not permitted|\bEACCES\b|\bEPERM\b|are you root\?"
    r"|must be run as root|Read-only file system"
)
_NO_SOLUTION = re.compile(r"/solution/solve\.sh: No such file or directory")


def _tail(lines: list[str], count: int = TAIL_LINES) -> list[str]:
    kept = [line.rstrip() for line in lines if line.strip()]
    return kept[-count:]


def network_hosts(text: str) -> list[str] | None:
    """The hosts a log failed to reach ([] when it names none), or None when it shows no
    name-resolution or connection failure."""
    if not _NETWORK.search(text):
        return None
    hosts: list[str] = []
    for line in text.splitlines():
        for pattern in _NETWORK_HOSTS:
            for host in pattern.findall(line):
                if host not in hosts:
                    hosts.append(host)
    if _PIP_RETRY.search(text):
        indexes = [
            urlsplit(url.strip()).hostname or ""
            for found in _PIP_INDEXES.findall(text)
            for url in found.split(",")
        ]
        for host in [h for h in indexes if h] or [_PIP_DEFAULT_HOST]:
            if host not in hosts:
                hosts.append(host)
    return hosts


def root_refusals(text: str) -> list[str]:
    """The lines of a solution's output where it was refused what root could do."""
    return [line.strip() for line in text.splitlines() if _ROOT.search(line)]


def short(trial: TrialRow | None) -> str:
    """A trial's outcome for the table's columns: passed, failed, or its error kind."""
    if trial is None:
        return "did not run"
    if trial.outcome == "error":
        return trial.error_kind or "error"
    return trial.outcome or trial.status


def _unscored(trial: TrialRow) -> bool:
    """A trial our side failed to score (infra, sandbox, judge): it says nothing of the task."""
    return trial.outcome == "error" and trial.error_kind not in COUNTED_AS_FAILED


def egress_refusals(events: list[str]) -> list[tuple[str, str]]:
    """(host, why) of each connection the trial's egress policy refused, from its `egress`
    events (sandbox/egress.py writes them: `PHASE HOST:PORT refused: WHY, N bytes out, M in`)."""
    found = []
    for event in events:
        if matched := _REFUSED.match(event):
            found.append((matched["host"], matched["why"]))
    return found


def _named(hosts: list[str]) -> str:
    return f" ({'host' if len(hosts) == 1 else 'hosts'} {', '.join(hosts[:3])})"


def _failed_oracle(oracle: TrialRow, logs: TrialLogs) -> tuple[str, list[str]]:
    """Why the reference solution did not pass, and the lines that show it."""
    both = f"{logs.solution}\n{logs.verifier}\n{oracle.error_message or ''}"
    exits = [e for e in logs.events if e.startswith("solve.sh exited")]
    if refusals := egress_refusals(logs.events):
        # The policy said no, by name: more certain than any log's wording.
        refused = list(dict.fromkeys(host for host, _ in refusals))
        return (
            "needs network" + _named(refused),
            [*exits, *(f"refused {host}: {why}" for host, why in refusals[:5]),
             "run it under an egress policy that names the host (the job's egress, "
             "EXAMHALL_EGRESS_POLICIES), or ship what the task needs in its environment/"],
        )  # fmt: skip
    hosts = network_hosts(both)
    if hosts is not None:
        lines = [line.strip() for line in both.splitlines() if _NETWORK.search(line)]
        hint = (
            "a certificate on the way was not one the sandbox trusts (a TLS-inspecting proxy "
            "between the box and the host?)"
            if _UNTRUSTED.search(both)
            else "the job ran offline; run it under an egress policy that names the host (the "
            "job's egress, EXAMHALL_EGRESS_POLICIES), or ship what the task needs in its "
            "environment/Dockerfile"
        )
        return "needs network" + (_named(hosts) if hosts else ""), [*exits, *_tail(lines, 5), hint]
    refused = root_refusals(logs.solution)
    if refused:
        return (
            "needs root",
            [*exits, *refused[-5:], "the oracle runs solution/solve.sh as the task's "
             "unprivileged agent user; do the root part in environment/Dockerfile"],
        )  # fmt: skip
    verifier = [f"verifier.log: {line}" for line in _tail(logs.verifier.splitlines())]
    if read_only := [
        line.strip() for line in logs.verifier.splitlines() if _READ_ONLY.search(line)
    ]:
        return (
            "read-only file system",
            [*exits, *read_only[-5:], "the verifier wrote to a path the sandbox keeps read-only "
             "(/proc, /sys, or the strict verifier's files); write under the workdir, /tmp or "
             "/logs"],
        )  # fmt: skip
    strict = "strict verifier" in " ".join(logs.events)
    if strict and (refused := root_refusals(logs.verifier)):
        return (
            "needs root",
            [*exits, *refused[-5:], "the task asks for the strict verifier "
             '([metadata.examhall] verifier = "strict"), which holds no capability; remove '
             "that to run tests/test.sh as Harbor's verifier runs"],
        )  # fmt: skip
    if oracle.error_kind in ("no_reward", "judge_error"):
        return "verifier error", [*exits, oracle.error_message or "", *verifier]
    if oracle.outcome == "error":
        kind = oracle.error_kind or "error"
        return (
            f"the oracle's run ended in {kind}",
            [*exits, oracle.error_message or "", *verifier],
        )
    score = "" if oracle.score is None else f" (score {oracle.score:g})"
    return (
        f"fails with its reference solution{score}",
        [*exits, *verifier, "check solution/solve.sh and tests/test.sh"],
    )


def verdict(
    task: str,
    oracle: TrialRow | None,
    nop: TrialRow | None,
    *,
    oracle_logs: TrialLogs = NO_LOGS,
    has_solution: bool | None = None,
    build: BuildFailure | None = None,
    warnings: Iterable[str] = (),
    where: Mapping[str, str] | None = None,
    refused: Sequence[str] = (),
) -> TaskVerdict:
    """A task's verdict. `has_solution`: whether its directory has solution/solve.sh (None:
    not known here, e.g. a suite the server has); `build`: the job's build failure naming
    this task; `warnings`: the workspace scan's; `where`: trial id -> where to open it;
    `refused`: why the task did not load (it then ran no trial)."""
    ids = {ORACLE: oracle.id if oracle else None, NOP: nop.id if nop else None}
    where = where or {}
    opened = [
        f"{agent} trial: {where.get(trial_id, trial_id)}"
        for agent, trial_id in ids.items()
        if trial_id is not None
    ]
    warned = list(warnings)

    def row(
        kind: Verdict, cause: str, detail: Iterable[str], show: Iterable[str] = ()
    ) -> TaskVerdict:
        lines = [line for line in detail if line] + [*warned, *show]
        return TaskVerdict(
            task=task,
            verdict=kind,
            cause=cause,
            oracle=short(oracle) if build is None else BUILD_ERROR,
            nop=short(nop) if build is None else BUILD_ERROR,
            trials=ids,
            detail="\n".join(lines),
        )

    if refused:
        # "task t: task.toml [verifier.env].KEY: why" -> "does not load (task.toml [verif...)"
        lines = [line.removeprefix(f"task {task}: ") for line in refused]
        where_ = lines[0].split(": ", 1)[0][:80]
        return row("broken", f"does not load ({where_})", [*lines, "fix it and check it again"])
    built = build or next(
        (
            BuildFailure(task, t.failed_step, t.error_message or "")
            for t in (oracle, nop)
            if t is not None and t.error_kind == BUILD_ERROR
        ),
        None,
    )
    lacks = has_solution is False or bool(_NO_SOLUTION.search(oracle_logs.solution))
    if built is not None:
        # Told as well, so that fixing the build is not followed by a second surprise.
        also = ["also: no reference solution (add solution/solve.sh)"] if lacks else []
        return row("broken", built.cause, [built.detail, *also], opened)
    if lacks:
        return row(
            "broken",
            "no reference solution",
            ["the task has no solution/solve.sh, so nothing shows it can be solved; add one"],
            opened,
        )
    if oracle is None:
        return row("broken", "its oracle trial did not run", [], opened)
    if oracle.outcome != "passed":
        cause, lines = _failed_oracle(oracle, oracle_logs)
        return row("broken", cause, lines, opened)
    if nop is None:
        return row("broken", "its nop trial did not run", [], opened)
    if nop.outcome == "passed":
        return row(
            "broken",
            "passes with nop",
            ["its verifier does not check what the agent did: a run that did nothing passed"],
            opened,
        )
    if _unscored(nop):
        return row(
            "broken",
            f"the nop agent's run was not scored ({nop.error_kind})",
            [nop.error_message or "", "run the check again"],
            opened,
        )
    if warned:
        return row("warning", "tests/test.sh runs what the agent controls as root", [], opened)
    return row("sound", "passes with the oracle, fails with nop", [])


def last_attempts(trials: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str], TrialRow]:
    """(task, agent) -> the last attempt of its trial."""
    last: dict[tuple[str, str], TrialRow] = {}
    for trial in sorted((TrialRow.model_validate(t) for t in trials), key=lambda t: t.attempt):
        last[(trial.case_id, trial.variant)] = trial
    return last
