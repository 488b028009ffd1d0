"""Suites of tasks that bring their own environments (Harbor's format), on the control plane.

A task suite is always an archive: an uploaded one (`sha256:<hex>`, POST /v1/suites) or a
shipped directory of evals/ packed the same way, so that a job's suite row holds the exact
bytes its trials ran and every control plane reads the same tasks back (storing and reading
it is service/suite_resolver.py's). Nothing here runs task code: task.toml and
instruction.md are parsed, the rest is carried.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from sandbox.protocol import TaskSpec, runs_solution
from service.domain.planner import refused_task
from service.environments.errors import EnvironmentProblem
from service.environments.source import DOCKERFILE, EnvironmentSource, dockerfile_source
from service.lru import LRU
from service.settings import get_settings
from service.suites.archives import (
    DEFAULT_MAX_FILES,
    DEFAULT_MAX_UNPACKED_BYTES,
    ID_PREFIX,
    read_archive,
)
from service.suites.base import SuiteError, shipped_dir
from service.suites.harbor.tasks import HarborTask, load_suite

# Parsed suites kept per control plane: the scheduler builds a run spec for every trial.
_CACHE_SIZE = 16
# The margin of a task trial's deadline over its agent's and verifier's timeouts: the
# worker's start, the verifier's set-up, the report.
DEADLINE_MARGIN_S = 60.0


@dataclass(frozen=True)
class TaskSuite:
    name: str
    archive: bytes
    tasks: Mapping[str, HarborTask]
    # The archive's executable files: a task's environment keeps their mode in its build.
    executable: frozenset[str] = frozenset()
    # Tasks of the archive that do not load, and why: the upload named them; a job cannot.
    refused: Mapping[str, list[str]] = dataclasses.field(default_factory=dict)

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.archive).hexdigest()

    @property
    def id(self) -> str:
        return ID_PREFIX + self.sha256

    def task(self, task_id: str) -> HarborTask:
        try:
            return self.tasks[task_id]
        except KeyError:
            if task_id in self.refused:
                raise SuiteError(refused_task(self.name, task_id, self.refused[task_id])) from None
            raise SuiteError(f"Suite {self.name} has no task {task_id!r}.") from None


def from_archive(name: str, data: bytes) -> TaskSuite:
    """A task suite from its archive, read as an upload is (everything hostile refused)."""
    files = read_archive(
        data,
        max_bytes=get_settings().max_suite_archive_bytes,
        max_files=DEFAULT_MAX_FILES,
        max_unpacked_bytes=DEFAULT_MAX_UNPACKED_BYTES,
    )
    loaded = load_suite({path: file.data for path, file in files.items()})
    executable = frozenset(path for path, file in files.items() if file.executable)
    tasks = {task.id: task for task in loaded.tasks}
    return TaskSuite(name, data, tasks, executable, loaded.refused)


def shipped_task_suites() -> list[str]:
    """The directories of evals/ that are Harbor suites."""
    return sorted(
        path.name
        for path in shipped_dir().iterdir()
        if path.is_dir() and not path.name.startswith(("_", ".")) and _holds_tasks(path)
    )


def _holds_tasks(path: Path) -> bool:
    return any(child.is_dir() and (child / "task.toml").is_file() for child in path.iterdir())


_parsed: LRU[str, TaskSuite] = LRU(_CACHE_SIZE)


def cached(sha256: str, name: str, archive: bytes) -> TaskSuite:
    """A stored task suite (the sha256 of its archive) as `name` (the job's or the caller's
    name for it, never the row's: that is another team's, perhaps), parsed once per control
    plane (while it is among the last few)."""
    suite = _parsed.get(sha256)
    if suite is None:
        suite = from_archive(name, archive)
        _parsed.put(sha256, suite)
    return suite if suite.name == name else dataclasses.replace(suite, name=name)


def _encoded(files: Mapping[str, bytes]) -> dict[str, str]:
    return {name: base64.b64encode(data).decode() for name, data in files.items()}


def task_spec(
    task: HarborTask,
    *,
    agent: str | None,
    provider: str,
    workdir: str | None,
    egress: bool = False,
    installed: bool = False,
) -> TaskSpec:
    """What the worker gets of a task. The verifier's files go to the root supervisor only;
    the reference solution, the whole of solution/, goes only where it is the agent (the
    oracle) or the script a scripted model replays in examhall's own loop, never to a real
    model's trial nor to an installed agent's (`installed`), under any model."""
    with_solution = runs_solution(agent, provider, installed=installed)
    return TaskSpec(
        name=task.id,
        instruction=task.instruction,
        tests=_encoded(task.tests),
        solution=_encoded(task.solution) if with_solution else None,
        verifier_timeout_s=task.limits.verifier_timeout_s,
        verifier_env=dict(task.limits.verifier_env),
        env=dict(task.limits.environment_env),
        solution_env=dict(task.limits.solution_env) if with_solution else {},
        workdir=workdir,
        agent_user=task.limits.agent_user,
        strict_verifier=task.limits.strict_verifier,
        agent=agent,
        egress=egress,
    )


def trial_deadline_s(task: HarborTask, agent_timeout_s: float) -> float:
    """A task trial's wall-clock deadline: its agent's time, its verifier's, a margin."""
    return agent_timeout_s + task.limits.verifier_timeout_s + DEADLINE_MARGIN_S


def environment_source(suite: TaskSuite, task_id: str) -> EnvironmentSource:
    """What a task's environment is built from: its environment/ directory, or the prebuilt
    image task.toml names (through the box's image map like any FROM)."""
    task = suite.task(task_id)
    files = dict(task.environment_files)
    if task.docker_image and DOCKERFILE not in files:
        files[DOCKERFILE] = f"FROM {task.docker_image}\n".encode()
    # Paths in a suite of task directories, or in one task at the archive's root.
    prefixes = (f"{task.id}/environment/", "environment/")
    executable = frozenset(
        path.removeprefix(prefix)
        for prefix in prefixes
        for path in suite.executable
        if path.startswith(prefix)
    )
    try:
        return dockerfile_source(
            f"suite {suite.name}, task {task.id}",
            files,
            build_timeout_s=task.limits.build_timeout_s,
            workdir=task.limits.workdir,
            executable=executable,
        )
    except EnvironmentProblem as exc:
        raise SuiteError(str(exc)) from None
