"""The Python format: a module of examhall cases and judges (sandbox/suite.py), its source
carried by each trial, its cases listed by importing it in a sandbox."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from service.environments.source import EnvironmentSource
from service.suites.base import SuiteData, SuiteError, SuiteTreeError
from service.suites.python.environments import source
from service.suites.python.source import shipped_suites

if TYPE_CHECKING:
    from service.suites.harbor.suite import TaskSuite
    from service.suites.harbor.tasks import LoadedTasks

KIND = "python"


class PythonFormat:
    kind = KIND
    tasks = False
    builtin_agents = False
    # Only the cases that declare an environment build one (Design.builds says which).
    builds_environments = False

    def shipped(self) -> list[str]:
        return shipped_suites()

    def names(self, ref: str) -> bool:
        return ref in shipped_suites()

    def environment_sources(
        self,
        suite: SuiteData,
        cases: Sequence[str],
        declared: Mapping[str, Mapping[str, Any]],
    ) -> dict[str, EnvironmentSource]:
        # The listing gave each case's environment; the job kept those of its cases.
        return {case: source(suite.name, case, described) for case, described in declared.items()}

    def load_tasks(self, suite: SuiteData) -> TaskSuite:
        raise SuiteError(f"Suite {suite.name} is a Python suite: its cases are no tasks.")

    def recognises(self, files: Mapping[str, bytes]) -> bool:
        return False

    def validate(self, files: Mapping[str, bytes]) -> LoadedTasks:
        raise SuiteTreeError("A Python suite is uploaded as its source, not as a tree.")


PYTHON = PythonFormat()
