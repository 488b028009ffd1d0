"""Suites uploaded as trees (POST /v1/suites): an archive's files, checked, and what makes
them a suite.

`validate_suite_tree` reads the archive's files with the Harbor loader (service.harbor) and
answers the tasks that load and why each other one does not, or raises SuiteTreeError saying
which file is wrong, or why no task loads.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from service.archives import ArchiveFile, archive_id, read_archive
from service.harbor.tasks import HarborTaskError, LoadedTasks, load_suite

# The only kind of uploaded tree so far: a directory of Harbor tasks.
HARBOR = "harbor"


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
    refused: dict[str, list[str]]  # the tasks that do not load: task id -> problems

    @property
    def unpacked_bytes(self) -> int:
        return sum(len(f.data) for f in self.files.values())


def validate_suite_tree(files: Mapping[str, ArchiveFile]) -> LoadedTasks:
    """A Harbor suite tree's tasks: every task.toml parsed, every task's files checked and its
    limits mapped (service.harbor); those that load, and why each other one does not. A
    SuiteTreeError listing each problem by task and field when none loads."""
    try:
        return load_suite({path: file.data for path, file in files.items()})
    except HarborTaskError as exc:
        raise SuiteTreeError(str(exc)) from None


def read_suite_tree(
    data: bytes, *, max_bytes: int, max_files: int, max_unpacked_bytes: int
) -> SuiteTree:
    """An uploaded archive as a suite: read (service.archives refuses what is hostile) and
    validated; an ArchiveError or SuiteTreeError otherwise."""
    files = read_archive(
        data, max_bytes=max_bytes, max_files=max_files, max_unpacked_bytes=max_unpacked_bytes
    )
    loaded = validate_suite_tree(files)
    return SuiteTree(archive_id(data), files, [task.id for task in loaded.tasks], loaded.refused)
