"""Suites in Harbor's task format (Terminal-Bench 2 and Harbor's adapters): task.toml,
instruction.md, environment/, tests/test.sh, solution/ (solve.sh and its files) per task.

The control plane's side only: the files are parsed and checked here, never run. The task
model (tasks.py, limits.py) is also what any other format of tasks converts into; suite.py
is a stored suite of them and its run specs, format.py the format.
"""

from service.suites.harbor.format import HARBOR, HarborFormat
from service.suites.harbor.limits import TaskLimits, map_limits
from service.suites.harbor.suite import (
    TaskSuite,
    environment_source,
    from_archive,
    shipped_task_suites,
    task_spec,
    trial_deadline_s,
)
from service.suites.harbor.task_config import TaskConfig, TaskConfigError, parse_task_config
from service.suites.harbor.tasks import (
    HarborTask,
    HarborTaskError,
    LoadedTasks,
    is_harbor_tree,
    load_suite,
    load_task_dir,
    load_tasks,
    read_tree,
)

__all__ = [
    "HARBOR",
    "HarborFormat",
    "HarborTask",
    "HarborTaskError",
    "LoadedTasks",
    "TaskConfig",
    "TaskConfigError",
    "TaskLimits",
    "TaskSuite",
    "environment_source",
    "from_archive",
    "is_harbor_tree",
    "load_suite",
    "load_task_dir",
    "load_tasks",
    "map_limits",
    "parse_task_config",
    "read_tree",
    "shipped_task_suites",
    "task_spec",
    "trial_deadline_s",
]
