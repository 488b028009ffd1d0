"""Suites in Harbor's task format (Terminal-Bench 2 and Harbor's adapters): task.toml,
instruction.md, environment/, tests/test.sh, solution/ (solve.sh and its files) per task.

The control plane's side only: the files are parsed and checked here, never run.
"""

from service.harbor.limits import TaskLimits, map_limits
from service.harbor.task_config import TaskConfig, TaskConfigError, parse_task_config
from service.harbor.tasks import (
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
    "HarborTask",
    "HarborTaskError",
    "LoadedTasks",
    "TaskConfig",
    "TaskConfigError",
    "TaskLimits",
    "is_harbor_tree",
    "load_suite",
    "load_task_dir",
    "load_tasks",
    "map_limits",
    "parse_task_config",
    "read_tree",
]
