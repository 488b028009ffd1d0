"""Suites uploaded as trees (POST /v1/suites): an archive's files, checked, and what makes
them a suite.

`validate_suite_tree` is the one hook the Harbor loader (service.harbor) plugs into: it gets
the archive's files and answers the suite's case ids, or raises SuiteTreeError saying which
task (or file) is wrong and why. Until the loader is wired in, it checks only that the tree
holds at least one task directory (a top-level directory with a task.toml).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from service.archives import ArchiveFile, archive_id, read_archive

# The only kind of uploaded tree so far: a directory of Harbor tasks.
HARBOR = "harbor"
TASK_FILE = "task.toml"


class SuiteTreeError(ValueError):
    """A tree that is a valid archive but not a valid suite; `entry` is the file or task
    directory at fault, when there is one."""

    def __init__(self, message: str, entry: str | None = None) -> None:
        super().__init__(message)
        self.entry = entry


@dataclass(frozen=True)
class SuiteTree:
    id: str  # sha256:<hex> of the archive as uploaded
    files: dict[str, ArchiveFile]
    case_ids: list[str]

    @property
    def unpacked_bytes(self) -> int:
        return sum(len(f.data) for f in self.files.values())


def validate_suite_tree(files: Mapping[str, ArchiveFile]) -> list[str]:
    """The case ids of a Harbor suite tree: one per task directory, sorted.

    HOOK: point this at service.harbor's loader (parse every task.toml, check instruction.md,
    environment/ and tests/test.sh, map the limits), raising SuiteTreeError naming the task
    and field. What it returns is what POST /v1/suites reports and a job's cases are."""
    tasks = sorted(
        name.removesuffix(f"/{TASK_FILE}")
        for name in files
        if name.count("/") == 1 and name.endswith(f"/{TASK_FILE}")
    )
    if not tasks:
        hint = (
            " This archive has a task.toml at its root: it is one task; upload the directory "
            "that holds the task's directory instead."
            if TASK_FILE in files
            else ""
        )
        raise SuiteTreeError(
            "The archive holds no task: a Harbor suite is a directory of task directories, "
            f"each with a {TASK_FILE} (e.g. hello/{TASK_FILE}, hello/instruction.md)." + hint
        )
    return tasks


def read_suite_tree(
    data: bytes, *, max_bytes: int, max_files: int, max_unpacked_bytes: int
) -> SuiteTree:
    """An uploaded archive as a suite: read (service.archives refuses what is hostile) and
    validated; an ArchiveError or SuiteTreeError otherwise."""
    files = read_archive(
        data, max_bytes=max_bytes, max_files=max_files, max_unpacked_bytes=max_unpacked_bytes
    )
    return SuiteTree(archive_id(data), files, validate_suite_tree(files))
