"""Suites uploaded as trees (POST /v1/suites): an archive's files, checked, and what makes
them a suite.

`validate_suite_tree` reads the archive's files with the Harbor loader (service.harbor) and
answers the suite's case ids, or raises SuiteTreeError saying which task (or file) is wrong
and why.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from service.archives import ArchiveFile, archive_id, read_archive
from service.harbor.tasks import HarborTaskError, load_tasks

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

    @property
    def unpacked_bytes(self) -> int:
        return sum(len(f.data) for f in self.files.values())


def validate_suite_tree(files: Mapping[str, ArchiveFile]) -> list[str]:
    """The case ids of a Harbor suite tree, one per task, sorted: every task.toml parsed,
    every task's files checked and its limits mapped (service.harbor), or SuiteTreeError
    listing each problem by task and field."""
    try:
        tasks = load_tasks({path: file.data for path, file in files.items()})
    except HarborTaskError as exc:
        raise SuiteTreeError(str(exc)) from None
    return [task.id for task in tasks]


def read_suite_tree(
    data: bytes, *, max_bytes: int, max_files: int, max_unpacked_bytes: int
) -> SuiteTree:
    """An uploaded archive as a suite: read (service.archives refuses what is hostile) and
    validated; an ArchiveError or SuiteTreeError otherwise."""
    files = read_archive(
        data, max_bytes=max_bytes, max_files=max_files, max_unpacked_bytes=max_unpacked_bytes
    )
    return SuiteTree(archive_id(data), files, validate_suite_tree(files))
