"""A suite in Harbor's task format, read into HarborTasks (the control plane's side: only
TOML and Markdown are parsed here, no task code runs).

A Harbor suite is a directory of task directories, each of them:

    task.toml          limits and metadata (service/suites/harbor/task_config.py)
    instruction.md     the prompt
    environment/       the Docker build context: Dockerfile and what it COPYs
    tests/test.sh      the verifier, run as root after the agent stops; writes
                       /logs/verifier/reward.txt or reward.json
    solution/          the reference solution: solve.sh and what it uses (optional: without
                       solve.sh the oracle agent has nothing to run, and `check-tasks` says
                       so); the oracle and the scripted models get all of it in /solution

One task directory on its own is a suite of one. Each task is one case, its id the task
directory's name. The tree comes as {relative posix path: bytes}: from an uploaded archive
(service/suites/archives.py reads it into that form) or from a directory (load_task_dir).

Not taken from Harbor: `.harborignore` rules (every file under tests/ and solution/ is
copied), multi-container (docker-compose) environments, and multi-step tasks, which are
refused (see limits.py for everything task.toml may ask that is refused).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from sandbox.protocol import MAX_LINE_BYTES
from service.suites.base import SuiteError, case_id_problem
from service.suites.harbor.limits import TaskLimits, map_limits
from service.suites.harbor.task_config import TaskConfigError, parse_task_config

CONFIG = "task.toml"
INSTRUCTION = "instruction.md"
DOCKERFILE = "environment/Dockerfile"
TEST_SCRIPT = "tests/test.sh"
SOLVE_SCRIPT = "solve.sh"
# tests/ and solution/ travel base64-encoded (4 bytes for 3) in the trial's one run-request
# line (sandbox/protocol.py MAX_LINE_BYTES, 64 MiB): together at most 5/8 of it, so their
# encoding takes 5/6 and the rest of the request keeps the last sixth. Each is then written
# into a 64 MiB tmpfs (service/backends/docker/hardening.py TASK_DIRS), which this also fits.
# A larger pair would fail in the sandbox, an unscored trial, instead of here, a refusal.
MAX_CARRIED_BYTES = MAX_LINE_BYTES * 5 // 8
# A name counts this many times its bytes in that line: the most JSON's escapes make of one.
NAME_WEIGHT = 6
# The longest file or directory name, and path, Linux takes (NAME_MAX, PATH_MAX), in bytes.
MAX_NAME_BYTES = 255
MAX_PATH_BYTES = 4095
SOLUTION_DIR = "/solution/"
# Harbor's docker environment starts these with compose, several containers per trial.
COMPOSE_FILES = ("docker-compose.yaml", "docker-compose.yml", "compose.yaml", "compose.yml")

# Harbor strips leading canary lines (data-provenance markers) before the agent sees the
# instruction (harbor.models.task.task.strip_canary); so does examhall, so a prompt matches.
_CANARY_LINE = re.compile(r"^(<!--.*canary.*-->|#.*canary.*)$", re.IGNORECASE)


class HarborTaskError(SuiteError):
    """A Harbor suite that cannot be loaded; `problems` has one line per thing to fix, each
    naming the task (`task ID: ...`) and the file or field."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems


@dataclass(frozen=True)
class HarborTask:
    id: str
    instruction: str
    # Relative posix paths inside environment/, tests/ and solution/.
    environment_files: dict[str, bytes]
    tests: dict[str, bytes]
    solution: dict[str, bytes]
    limits: TaskLimits
    # [environment].docker_image: a prebuilt image instead of environment/Dockerfile.
    docker_image: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    # [task].name (org/name) when the task has one.
    name: str | None = None

    @property
    def has_solution(self) -> bool:
        """Whether the oracle agent has a solution/solve.sh to run."""
        return SOLVE_SCRIPT in self.solution


def strip_canary(text: str) -> str:
    lines = text.split("\n")
    start = 0
    while start < len(lines) and _CANARY_LINE.match(lines[start].strip()):
        start += 1
    while start < len(lines) and not lines[start].strip():
        start += 1
    return "\n".join(lines[start:])


def _path_problem(path: str) -> str | None:
    """Why a key of the tree is not a plain relative posix path, or None."""
    parts = path.split("/")
    if not path or path.startswith("/") or "\\" in path or "\x00" in path:
        return f"{path!r} is not a relative posix path"
    if any(part in ("", ".", "..") for part in parts):
        return f"{path!r} has an empty, '.' or '..' component"
    return None


def is_harbor_tree(files: Mapping[str, bytes]) -> bool:
    """Whether the tree is a Harbor suite: a task.toml at its root (one task) or in a
    top-level directory (a directory of tasks)."""
    return any(
        path == CONFIG
        or (path.count("/") == 1 and path.endswith("/" + CONFIG) and not path.startswith("."))
        for path in files
    )


def _subtree(files: Mapping[str, bytes], prefix: str) -> dict[str, bytes]:
    return {
        path[len(prefix) :]: data for path, data in sorted(files.items()) if path.startswith(prefix)
    }


def _carried_problems(tests: Mapping[str, bytes], solution: Mapping[str, bytes]) -> list[str]:
    """What keeps tests/ and solution/ from reaching the container as they are: their size,
    or a solution name or path Linux does not take. Either would fail in the sandbox, as the
    box's fault (an unscored trial), where here it is the suite's, a refusal."""
    problems = [
        f"solution/{path}: the name {part[:40]!r}... is {len(part.encode())} bytes; a file "
        f"system takes at most {MAX_NAME_BYTES}, so shorten it"
        for path in solution
        for part in path.split("/")
        if len(part.encode()) > MAX_NAME_BYTES
    ]
    problems += [
        f"solution/{path[:40]}...: the path is {len((SOLUTION_DIR + path).encode())} bytes in "
        f"the container, past the {MAX_PATH_BYTES} Linux takes; nest it less deeply"
        for path in solution
        if len((SOLUTION_DIR + path).encode()) > MAX_PATH_BYTES
    ]
    size = sum(
        len(data) + NAME_WEIGHT * len(path.encode())
        for files in (tests, solution)
        for path, data in files.items()
    )
    if size > MAX_CARRIED_BYTES:
        problems.append(
            f"tests/ and solution/ come to {size} bytes together (their files, and their names "
            f"counted {NAME_WEIGHT} times); examhall carries at most {MAX_CARRIED_BYTES} of "
            "them into a trial (in its run request), so make them smaller"
        )
    return problems


def _load_one(task_id: str, files: Mapping[str, bytes]) -> HarborTask:
    """One task from its own tree (paths relative to the task directory)."""

    def refuse(problems: list[str]) -> HarborTaskError:
        return HarborTaskError([f"task {task_id}: {problem}" for problem in problems])

    if problem := case_id_problem(task_id):
        raise refuse([f"the directory name is not a usable case id: {problem}"])
    if CONFIG not in files:
        raise refuse([f"{CONFIG} is missing; every Harbor task has one"])
    try:
        config = parse_task_config(files[CONFIG])
    except TaskConfigError as error:
        raise refuse(error.problems) from None

    limits, problems = map_limits(config)
    problems = [f"task.toml {problem}" for problem in problems]
    environment = _subtree(files, "environment/")
    for compose in COMPOSE_FILES:
        if compose in environment:
            problems.append(
                f"environment/{compose}: a multi-container (compose) environment; examhall "
                "runs one container per trial, so give the task one environment/Dockerfile"
            )
    docker_image = config.environment.docker_image
    required = [INSTRUCTION, TEST_SCRIPT] + ([] if docker_image else [DOCKERFILE])
    for name in required:
        if name not in files:
            problems.append(f"{name} is missing; a Harbor task needs {', '.join(required)}")
    instruction = ""
    if INSTRUCTION in files:
        try:
            instruction = strip_canary(files[INSTRUCTION].decode("utf-8"))
        except UnicodeDecodeError as error:
            problems.append(f"{INSTRUCTION} is not UTF-8 text (byte {error.start}); save it so")
        else:
            if not instruction.strip():
                problems.append(f"{INSTRUCTION} is empty; it is the agent's prompt")
    tests = _subtree(files, "tests/")
    solution = _subtree(files, "solution/")
    problems.extend(_carried_problems(tests, solution))
    if problems:
        raise refuse(problems)
    return HarborTask(
        id=task_id,
        instruction=instruction,
        environment_files=environment,
        tests=tests,
        solution=solution,
        limits=limits,
        docker_image=docker_image,
        metadata=dict(config.metadata),
        name=config.task.name if config.task else None,
    )


@dataclass(frozen=True)
class LoadedTasks:
    """A suite's tasks that load, sorted by id, and why each other task does not."""

    tasks: list[HarborTask]
    refused: dict[str, list[str]]  # task id (its directory) -> problems, one per line

    def strict(self) -> list[HarborTask]:
        """The tasks, or a HarborTaskError naming every refused one's problems."""
        if self.refused:
            raise HarborTaskError([line for lines in self.refused.values() for line in lines])
        return self.tasks


def load_tasks(files: Mapping[str, bytes], *, root_name: str | None = None) -> list[HarborTask]:
    """A Harbor suite's tasks, sorted by id, or a HarborTaskError naming each problem of every
    task that does not load (`load_suite` keeps the tasks that do)."""
    return load_suite(files, root_name=root_name).strict()


def load_suite(
    files: Mapping[str, bytes], *, root_name: str | None = None, require_one: bool = True
) -> LoadedTasks:
    """A Harbor suite's tasks from its tree {relative posix path: bytes}: those that load, and
    why each other one does not. A HarborTaskError when the tree is no suite at all (a path
    refused, no task directory) or, with `require_one`, when no task loads.

    The tree is a directory of task directories, or one task directory (task.toml at its
    root); that one task's id is `root_name`, else its [task].name without the org.
    Top-level files (a README, a registry.json) are ignored, and so are hidden directories;
    any other top-level directory must be a task."""
    if bad := [problem for path in files if (problem := _path_problem(path))]:
        raise HarborTaskError([f"Harbor suite: {problem}" for problem in sorted(bad)])
    if CONFIG in files:
        task_id = root_name
        if task_id is None:
            try:
                package = parse_task_config(files[CONFIG]).task
            except TaskConfigError:
                package = None
            if package is None:
                raise HarborTaskError(
                    [
                        "Harbor suite: the task at the root has no name; put it in a directory "
                        'named after it, or give task.toml a [task] name = "org/NAME"'
                    ]
                )
            task_id = package.short_name
        return LoadedTasks([_load_one(task_id, files)], {})

    directories = sorted(
        {path.split("/", 1)[0] for path in files if "/" in path and not path.startswith(".")}
    )
    if not directories:
        raise HarborTaskError(
            [
                "Harbor suite: no task.toml at the root or in a top-level directory; a Harbor "
                "suite is a directory of task directories, each with its task.toml"
            ]
        )
    refused: dict[str, list[str]] = {}
    tasks: list[HarborTask] = []
    for directory in directories:
        tree = _subtree(files, directory + "/")
        if CONFIG not in tree:
            deeper = sorted(p for p in tree if p.endswith("/" + CONFIG))
            hint = (
                f" (there is one at {directory}/{deeper[0]}: is the suite one level down?)"
                if deeper
                else ""
            )
            refused[directory] = [
                f"task {directory}: {CONFIG} is missing; every top-level directory of a Harbor "
                f"suite is a task{hint}; add it, or remove the directory"
            ]
            continue
        try:
            tasks.append(_load_one(directory, tree))
        except HarborTaskError as error:
            refused[directory] = error.problems
    if not tasks and require_one:
        raise HarborTaskError([line for lines in refused.values() for line in lines])
    return LoadedTasks(sorted(tasks, key=lambda task: task.id), refused)


def read_tree(root: Path) -> dict[str, bytes]:
    """A directory's files as {relative posix path: bytes}. A link is read as what it points
    to when that is a file inside `root`; a link out of it, or to a directory, is refused,
    as an uploaded archive's would be. `.git` directories are skipped."""
    root = root.resolve()
    files: dict[str, bytes] = {}
    problems: list[str] = []
    pending = [root]
    while pending:
        directory = pending.pop()
        for entry in sorted(directory.iterdir()):
            relative = PurePosixPath(entry.relative_to(root).as_posix())
            if entry.is_symlink():
                target = entry.resolve()
                if not target.is_relative_to(root) or not target.is_file():
                    problems.append(
                        f"Harbor suite: {relative} is a link to {target}, outside the suite "
                        "or not a file; replace it with the file itself"
                    )
                    continue
                files[str(relative)] = target.read_bytes()
            elif entry.is_dir():
                if entry.name != ".git":
                    pending.append(entry)
            elif entry.is_file():
                files[str(relative)] = entry.read_bytes()
            else:
                problems.append(f"Harbor suite: {relative} is not a regular file; remove it")
    if problems:
        raise HarborTaskError(problems)
    return files


def load_task_dir(path: Path) -> list[HarborTask]:
    """The tasks of a Harbor suite on disk: a directory of task directories, or one task
    directory (then a suite of one, named after the directory)."""
    if not path.is_dir():
        raise HarborTaskError([f"Harbor suite: {path} is not a directory"])
    files = read_tree(path)
    root_name = path.resolve().name if CONFIG in files else None
    return load_tasks(files, root_name=root_name)
