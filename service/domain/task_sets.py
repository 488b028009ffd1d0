"""What a job's `suite` says when it names a pushed task set: `NAME@VERSION`, `NAME` (its
newest version), or either after `OWNER/` (a team's name, or `admin`) for a set another owner
shared. Pure: which sets exist, and who may read them, is the store's
(service/store/task_sets.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# A set's name follows an upload's (service/api/routes/suites.py NAME_PATTERN); a version
# may also hold '+' (semver's build metadata). Neither may hold '@' or '/', so the display
# name a job keeps (`NAME@VERSION`, `OWNER/NAME@VERSION`) parses back without doubt.
NAME = r"[A-Za-z0-9_.-]{1,100}"
VERSION = r"[A-Za-z0-9_.+-]{1,60}"
OWNER = r"[a-z0-9][a-z0-9_-]{0,62}"
_REF = re.compile(rf"(?:(?P<owner>{OWNER})/)?(?P<name>{NAME})(?:@(?P<version>{VERSION}))?")


@dataclass(frozen=True)
class SetRef:
    name: str
    version: str | None = None  # None: the newest pushed
    owner: str | None = None  # the owner's display name; None: the caller's, else one shared

    @classmethod
    def parse(cls, text: str) -> SetRef | None:
        """The reference `text` makes, or None when it cannot name a set."""
        found = _REF.fullmatch(text)
        if found is None:
            return None
        return cls(found["name"], found["version"], found["owner"])

    def __str__(self) -> str:
        owner = f"{self.owner}/" if self.owner else ""
        version = f"@{self.version}" if self.version else ""
        return f"{owner}{self.name}{version}"


def parse_push(text: str) -> tuple[str, str]:
    """`NAME@VERSION` as `examhall suites push` takes it: both parts required."""
    ref = SetRef.parse(text)
    if ref is None or ref.version is None or ref.owner is not None:
        raise ValueError(
            f"{text!r} is not NAME@VERSION: name a set (letters, digits, '_', '.', '-') and its "
            "version (the same, and '+'), e.g. my-tasks@1.0."
        )
    return ref.name, ref.version


def version_of(suite_name: str) -> str | None:
    """The set version a job's suite name holds (`...@VERSION`), or None for a job that named
    an upload or a shipped suite (their names hold no '@')."""
    ref = SetRef.parse(suite_name)
    return ref.version if ref is not None else None
