"""Suites uploaded as trees (POST /v1/suites): an archive's files, checked, and what makes
them a suite.

`read_suite_tree` reads the archive (service/suites/archives.py refuses what is hostile) and
has the format that recognises the files validate them (service/suites/registry.py
upload_format): the tasks that load and why each other one does not, or a SuiteTreeError
saying which file is wrong, or why no task loads.
"""

from __future__ import annotations

from dataclasses import dataclass

from service.suites.archives import ArchiveFile, archive_id, read_archive
from service.suites.registry import upload_format


@dataclass(frozen=True)
class SuiteTree:
    id: str  # sha256:<hex> of the archive as uploaded
    kind: str  # the format's, as the suites table stores it
    files: dict[str, ArchiveFile]
    case_ids: list[str]
    refused: dict[str, list[str]]  # the tasks that do not load: task id -> problems

    @property
    def unpacked_bytes(self) -> int:
        return sum(len(f.data) for f in self.files.values())


def read_suite_tree(
    data: bytes, *, max_bytes: int, max_files: int, max_unpacked_bytes: int
) -> SuiteTree:
    """An uploaded archive as a suite: read and validated by its format; an ArchiveError or
    SuiteTreeError otherwise."""
    files = read_archive(
        data, max_bytes=max_bytes, max_files=max_files, max_unpacked_bytes=max_unpacked_bytes
    )
    tree = {path: file.data for path, file in files.items()}
    suite_format = upload_format(tree)
    loaded = suite_format.validate(tree)
    return SuiteTree(
        archive_id(data),
        suite_format.kind,
        files,
        [task.id for task in loaded.tasks],
        loaded.refused,
    )
