"""The seam every suite format stands behind, and what all formats share.

A format is a package of service/suites/ with an object satisfying `SuiteFormat`, named in
service/suites/registry.py by the kind its rows of the suites table carry. Everything here is
pure: files and bytes in, cases, tasks and environment sources out. Listing a Python suite in
a sandbox is the scheduler's (service/scheduler/listing.py); reading a suite through the
store, for a request or a job, is service/suite_resolver.py's.

A format's cases run in one of the worker's two ways: as a Python module the worker imports
(`tasks` False: its cases are listed by importing it in a sandbox, its trials carry its
source), or as tasks (`tasks` True: read from the archive the suites table stores, converted
into Harbor's task model, service/suites/harbor/, each with its own environment and
verifier), the way Harbor's adapters convert many formats into one.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import evals

if TYPE_CHECKING:
    from service.environments.source import EnvironmentSource
    from service.suites.harbor.suite import TaskSuite
    from service.suites.harbor.tasks import LoadedTasks

# trials.case_id is VARCHAR(200): PostgreSQL refuses a longer value (SQLite would keep it).
MAX_CASE_ID_CHARS = 200


class SuiteError(ValueError):
    pass


class SuiteTreeError(ValueError):
    """A tree that is a valid archive but not a valid suite; `entry` is the file or task
    directory at fault, when there is one."""

    def __init__(self, message: str, entry: str | None = None) -> None:
        super().__init__(message)
        self.entry = entry


def shipped_dir() -> Path:
    """evals/, where the shipped suites of every format are."""
    return Path(evals.__file__).resolve().parent


def case_id_problem(case_id: object) -> str | None:
    """Why a listed case id cannot be stored and shown, or None. The id comes from suite code,
    so it is checked here, once, before any row holds it."""
    if not isinstance(case_id, str) or not case_id:
        return f"Case id {case_id!r} must be a non-empty string."
    shown = repr(case_id[:60]) + ("..." if len(case_id) > 60 else "")
    if len(case_id) > MAX_CASE_ID_CHARS:
        return (
            f"Case id {shown} is {len(case_id)} characters long; the store keeps at most "
            f"{MAX_CASE_ID_CHARS}. Shorten it."
        )
    for char in case_id:
        # Cc: control characters, NUL among them (PostgreSQL cannot store NUL in text);
        # Cs: lone surrogates, which no encoding can write.
        if unicodedata.category(char) in ("Cc", "Cs"):
            return (
                f"Case id {shown} contains the control character {char!r}; use printable "
                "characters only."
            )
    return None


@dataclass(frozen=True)
class SuiteData:
    """A suite as the suites table holds it, under the name a job (or a caller) gives it:
    the row's own name is the first submitter's, perhaps another team's."""

    sha256: str
    name: str
    source: str = ""
    archive: bytes | None = None


class SuiteFormat(Protocol):
    """One format of suites. The planner reads `builtin_agents` and `builds_environments`
    (service.domain.planner.SuiteTraits); the rest is read by the API, the scheduler and the
    preparer, none of which compares a kind."""

    # The suites table's `kind` of its rows: stored, so never renamed.
    kind: str
    # Its cases are tasks read from a stored archive (load_tasks), not a module listed in a
    # sandbox; so it is uploaded as an archive (validate) and named by its `sha256:` id.
    tasks: bool
    # The built-in agents (oracle, nop) run on it: its cases have solutions to run.
    builtin_agents: bool
    # Every job of it runs in images built before its trials are planned (it waits in
    # `building`), whatever its cases declare.
    builds_environments: bool

    def shipped(self) -> list[str]:
        """The names of its suites in evals/."""
        ...

    def names(self, ref: str) -> bool:
        """Whether a job's `suite`, a string, names a shipped suite of this format (an
        upload's `sha256:` id is the format of its stored row: service/suite_resolver.py)."""
        ...

    def environment_sources(
        self,
        suite: SuiteData,
        cases: Sequence[str],
        declared: Mapping[str, Mapping[str, Any]],
    ) -> dict[str, EnvironmentSource]:
        """What each of the job's `cases` that has an environment of its own is built from;
        `declared` are the environments its cases declared when listed (the job's spec)."""
        ...

    def load_tasks(self, suite: SuiteData) -> TaskSuite:
        """A stored suite's tasks (a `tasks` format's; SuiteError for any other)."""
        ...

    def recognises(self, files: Mapping[str, bytes]) -> bool:
        """Whether an uploaded tree looks like a suite of this format (a `tasks` format's)."""
        ...

    def validate(self, files: Mapping[str, bytes]) -> LoadedTasks:
        """An uploaded tree's tasks, those that load and why each other does not; a
        SuiteTreeError when it is no suite of this format (a `tasks` format's)."""
        ...
