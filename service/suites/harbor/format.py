"""Harbor's format: a directory of task directories (task.toml, instruction.md,
environment/, tests/, solution/), stored as the archive of its tree; every job of it builds
its tasks' environments before its trials are planned."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from service.environments.source import EnvironmentSource
from service.suites.base import SuiteData, SuiteError, SuiteTreeError
from service.suites.harbor.suite import (
    TaskSuite,
    cached,
    environment_source,
    shipped_task_suites,
)
from service.suites.harbor.tasks import HarborTaskError, LoadedTasks, is_harbor_tree, load_suite

# The suites table's kind of its rows (and, before the registry, the only uploaded tree's).
KIND = "harbor"


class HarborFormat:
    kind = KIND
    tasks = True
    builtin_agents = True
    builds_environments = True

    def shipped(self) -> list[str]:
        return shipped_task_suites()

    def names(self, ref: str) -> bool:
        """A shipped task suite. (Never a path: a job comes over HTTP, and the box's files
        are not the caller's.)"""
        return ref in shipped_task_suites()

    def environment_sources(
        self,
        suite: SuiteData,
        cases: Sequence[str],
        declared: Mapping[str, Mapping[str, Any]],
    ) -> dict[str, EnvironmentSource]:
        # Every task has an environment: its environment/ directory or a prebuilt image.
        tasks = self.load_tasks(suite)
        return {case: environment_source(tasks, case) for case in cases}

    def load_tasks(self, suite: SuiteData) -> TaskSuite:
        if suite.archive is None:
            raise SuiteError(f"Suite {suite.name} ({suite.sha256}) is not a stored task suite.")
        return cached(suite.sha256, suite.name, suite.archive)

    def recognises(self, files: Mapping[str, bytes]) -> bool:
        return is_harbor_tree(files)

    def validate(self, files: Mapping[str, bytes]) -> LoadedTasks:
        """Every task.toml parsed, every task's files checked and its limits mapped
        (limits.py); those that load, and why each other one does not. A SuiteTreeError
        listing each problem by task and field when none loads."""
        try:
            return load_suite(files)
        except HarborTaskError as exc:
            raise SuiteTreeError(str(exc)) from None


HARBOR = HarborFormat()
