"""A suite through the store: what a job's `suite` names (a shipped name, an uploaded Python
source, an uploaded tree's `sha256:` id, a pushed set's `NAME@VERSION`) and a stored suite
read back for its job.

It sits above the pure formats (service/suites/) and the store, and below the API and the
scheduler, which both use it: the formats never read the store, and the store never asks
which format a row is.
"""

from __future__ import annotations

import hashlib

from sqlalchemy.orm import Session, sessionmaker

from sandbox.protocol import SuiteBundle
from service.domain.job_spec import JobRequest, UploadedSuite
from service.domain.planner import JobInputError
from service.domain.task_sets import SetRef
from service.store import task_sets
from service.store.models import Suite
from service.store.suites import get_suite_tree, owner_of, store_tree, uploaded_tree
from service.suites import (
    DEFAULT,
    FORMATS,
    SuiteData,
    SuiteError,
    SuiteFormat,
    format_named,
    format_of,
    shipped_dir,
    upload_format,
)
from service.suites.archives import is_archive_id, pack_directory
from service.suites.harbor import TaskSuite
from service.suites.python import load_suite, shipped_suites


def format_for(
    sessions: sessionmaker[Session],
    suite: str | UploadedSuite,
    *,
    team_id: str | None,
    admin: bool,
) -> SuiteFormat:
    """The format of the suite a job names: an uploaded source's, a shipped suite's by its
    name, or an upload's by its stored row, read only among the caller's own uploads (an
    admin's: any), so that the format, and so the checks a job meets, says nothing of what
    another team uploaded."""
    if not isinstance(suite, str):
        return DEFAULT
    if not is_archive_id(suite):
        if any(f.names(suite) for f in FORMATS.values()):
            return format_named(suite)
        try:
            with sessions() as session:
                found = pushed_set(session, suite, team_id=team_id, admin=admin)
        except SuiteError as exc:  # a set there, but not that version, or named ambiguously
            raise JobInputError(("body", "suite"), str(exc)) from None
        # A reference to no set is refused by python_source, which names every way in.
        return format_of(found[0].kind) if found is not None else DEFAULT
    with sessions() as session:
        found = uploaded(session, suite, owner_of(team_id), any_owner=admin)
        if found is None:
            # Refused by resolve_tasks as an upload the caller has not made.
            return upload_format({})
        return format_of(found[0].kind)


def python_source(request: JobRequest) -> SuiteBundle:
    """A Python suite's source: a shipped one by name, or the one the job carries."""
    if isinstance(request.suite, str):
        if request.suite not in shipped_suites():
            raise JobInputError(
                ("body", "suite"),
                f"Unknown suite {request.suite!r}: no suite this server ships "
                f"({', '.join(shipped_suites())}) and no task set you may read "
                "(`examhall suites list`). Upload your own as "
                '{"name": ..., "source": ...}, or push a task set with '
                "`examhall suites push NAME@VERSION DIR`.",
            )
        return load_suite(request.suite)
    return SuiteBundle(name=request.suite.name, source=request.suite.source)


def uploaded(
    session: Session, suite_id: str, owner: str, *, any_owner: bool = False
) -> tuple[Suite, str] | None:
    """The stored tree `sha256:<hex>` and `owner`'s name for it (service/store/suites.py
    uploaded_tree), or None: also for a suite whose format is not uploaded as a tree (a
    Python suite's row is reached through its jobs, not by id)."""
    found = uploaded_tree(session, suite_id, owner, any_owner=any_owner)
    if found is None or not format_of(found[0].kind).tasks:
        return None
    return found


def pushed_set(
    session: Session, ref: str, *, team_id: str | None, admin: bool
) -> tuple[Suite, str] | None:
    """The stored tree a set reference names (`NAME@VERSION`, `NAME`, `OWNER/NAME...`) among
    the sets the caller may read, and the name its job keeps; None when it names none. A
    SuiteError when the set is there but not the version, or the name is ambiguous."""
    parsed = SetRef.parse(ref)
    if parsed is None:
        return None
    caller = task_sets.Caller(owner_of(team_id), team_id, admin)
    try:
        found = task_sets.find(session, parsed, caller)
    except task_sets.TaskSetError as exc:
        raise SuiteError(str(exc)) from None
    if found is None:
        return None
    row = get_suite_tree(session, f"sha256:{found.sha256}")
    assert row is not None, f"set {ref} names sha256:{found.sha256}, which is not stored"
    return row, found.display(caller.owner)


def uploaded_tasks(row: Suite, name: str) -> TaskSuite:
    """A stored tree's tasks, as `name` (the caller's name for it, never the row's)."""
    return format_of(row.kind).load_tasks(SuiteData(row.sha256, name, archive=row.archive))


def resolve_tasks(
    session: Session, ref: str, suite_format: SuiteFormat, *, team_id: str | None, admin: bool
) -> TaskSuite:
    """The suite of tasks a job names, stored in the suites table (so its trials find it). An
    uploaded one only when the caller uploaded it (an admin: anyone), under the caller's name
    for it: the same refusal whether another team holds those bytes or no one does."""
    if is_archive_id(ref):
        found = uploaded(session, ref, owner_of(team_id), any_owner=admin)
        if found is None:
            raise SuiteError(
                f"You have uploaded no suite {ref}; upload it first (POST /v1/suites or "
                "`examhall submit DIR`)."
            )
        return uploaded_tasks(*found)
    if ref not in suite_format.shipped():
        pushed = pushed_set(session, ref, team_id=team_id, admin=admin)
        if pushed is not None:
            return uploaded_tasks(*pushed)
        raise SuiteError(
            f"{ref!r} is neither an uploaded suite's id, a shipped task suite, nor a task set "
            "you may read (`examhall suites list`)."
        )
    data = pack_directory(shipped_dir() / ref)
    sha256 = hashlib.sha256(data).hexdigest()
    suite = suite_format.load_tasks(SuiteData(sha256, ref, archive=data))
    # A shipped suite is everyone's: its bytes are stored, under no one's upload.
    store_tree(session, suite_id=suite.id, name=suite.name, kind=suite_format.kind, data=data)
    return suite


def stored(session: Session, sha256: str, name: str) -> tuple[SuiteFormat, SuiteData]:
    """A job's suite by its sha256, as `name` (the job's suite_name), and its format."""
    row = session.get(Suite, sha256)
    if row is None:
        return DEFAULT, SuiteData(sha256, name)
    return format_of(row.kind), SuiteData(sha256, name, row.source, row.archive)


def stored_tasks(session: Session, sha256: str, name: str) -> TaskSuite:
    """A job's suite of tasks by its sha256, as `name` (the job's suite_name)."""
    row = session.get(Suite, sha256)
    if row is None or row.archive is None:
        raise SuiteError(f"Suite {name} ({sha256}) is not a stored task suite.")
    return format_of(row.kind).load_tasks(SuiteData(sha256, name, archive=row.archive))
