"""/v1/suites: upload a suite as an archive of its tree, and read one back by id;
/v1/suite-sets: the named, versioned task sets the caller may read.

The body is the archive itself (a gzip'd or plain tar, Content-Type application/gzip,
application/x-tar or application/octet-stream), capped by EXAMHALL_MAX_SUITE_ARCHIVE_BYTES
before it is read: a declared Content-Length over the cap, or a body that passes it as it
streams in, answers 413 (the BodyLimit middleware does it first; the route counts again, so
it holds without it). The archive is read in memory, never unpacked onto a disk here; a
hostile or broken one answers 422 naming the entry and the reason. A suite's id is the sha256
of its bytes, which are stored once; but each team has its own uploads
(service/store/suites.py): bytes new to the team answer 201 under the name it gave, bytes it
uploaded before 200 under its first name, whoever else uploaded them. Reading a suite by id
finds only the caller's own uploads (an admin's: any), so no answer tells one team what
another has uploaded.

An upload with a `version` is also pushed as that version of the task set `name`
(service/store/task_sets.py): a job then names it `name@version`, or `name` for the newest.
A version never changes: pushing it again with other bytes answers 409 and stores nothing.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Annotated

from fastapi import APIRouter, HTTPException, Query, Request, Response
from starlette.concurrency import run_in_threadpool
from starlette.requests import ClientDisconnect

from service.api.access import NOT_FOUND
from service.api.auth import Caller
from service.api.context import Ctx
from service.api.schemas import (
    ErrorBody,
    RefusedTask,
    SuiteView,
    TaskSetVersionView,
    TaskSetView,
)
from service.domain.planner import JobInputError
from service.domain.task_sets import SetRef
from service.store import task_sets
from service.store.models import Suite
from service.store.suites import owner_of, save_upload
from service.suite_resolver import uploaded, uploaded_tasks
from service.suites import FORMATS, SuiteTreeError
from service.suites.archives import (
    DEFAULT_MAX_FILES,
    DEFAULT_MAX_UNPACKED_BYTES,
    ArchiveError,
    count_files,
)
from service.suites.trees import read_suite_tree

router = APIRouter()

# Which of gzip'd or plain the body is comes from its first bytes; the type only has to say
# it is an archive (or bytes: generic clients send application/octet-stream).
MEDIA_TYPES = (
    "application/gzip",
    "application/x-gzip",
    "application/x-tar",
    "application/octet-stream",
)
ARCHIVE_SETTING = "EXAMHALL_MAX_SUITE_ARCHIVE_BYTES"
# The name's rule is an uploaded Python suite's (service/domain/job_spec.py UploadedSuite).
NAME_PATTERN = r"^[A-Za-z0-9_.-]+$"
# A task set's version (service/domain/task_sets.py VERSION), its length given apart.
VERSION_PATTERN = r"^[A-Za-z0-9_.+-]*$"
_BINARY = {"schema": {"type": "string", "format": "binary"}}


def too_large(cap: int) -> HTTPException:
    return HTTPException(
        413,
        f"The suite archive is larger than this box accepts ({cap} bytes, {ARCHIVE_SETTING}). "
        "Leave large generated files out of the suite, or ask the box's admin to raise it.",
    )


async def read_capped(request: Request, cap: int) -> bytes:
    """The body, refused with 413 as soon as it is known to pass `cap`: by its declared
    Content-Length before any of it is read, else by counting it as it arrives."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > cap:
        raise too_large(cap)
    body = bytearray()
    try:
        async for chunk in request.stream():
            body += chunk
            if len(body) > cap:
                raise too_large(cap)
    except ClientDisconnect:
        # The body limit refused it already (or the client left): this answer goes nowhere.
        raise too_large(cap) from None
    return bytes(body)


def view(
    suite: Suite, name: str, files: int, tasks: list[str], refused: Mapping[str, list[str]]
) -> SuiteView:
    """A stored tree as `name`: the caller's own name for it, never another team's."""
    archive = suite.archive or b""
    return SuiteView(
        id=f"sha256:{suite.sha256}",
        name=name,
        kind=suite.kind,
        files=files,
        bytes=len(archive),
        tasks=tasks,
        refused=[
            RefusedTask(task=task, problems=list(problems))
            for task, problems in sorted(refused.items())
        ],
    )


@router.post(
    "/suites",
    status_code=201,
    response_model=SuiteView,
    responses={
        200: {"model": SuiteView, "description": "The caller uploaded these bytes before"},
        409: {"model": ErrorBody, "description": "The version is pushed with other bytes"},
        413: {"model": ErrorBody},
        415: {"model": ErrorBody},
        422: {"model": ErrorBody},
    },
    summary="Upload a suite as an archive of its directory",
    description="The body is a gzip'd (or plain) tar of a directory of Harbor tasks, as "
    "`examhall submit DIR` packs it. Answers the suite's id, `sha256:<hex>` of the bytes, "
    "which a job names as its `suite`, the tasks that loaded and, for each task that did not, "
    "why (the others are kept; 422 when none loads). Uploading the same bytes again answers "
    "200 and the same suite under the name of the caller's first upload of them; whether "
    "another team uploaded them changes nothing. With `version`, the upload is also pushed as "
    "`name@version` of the caller's task set `name`, which jobs then name instead of the id "
    "(`name` alone: its newest version); a version is immutable (409 for other bytes).",
    openapi_extra={
        "requestBody": {"required": True, "content": {media: _BINARY for media in MEDIA_TYPES}}
    },
)
async def upload_suite(
    request: Request,
    response: Response,
    c: Ctx,
    caller: Caller,
    name: Annotated[
        str,
        Query(
            min_length=1,
            max_length=100,
            pattern=NAME_PATTERN,
            description="the suite's display name (letters, digits, '_', '.', '-')",
        ),
    ],
    version: Annotated[
        str,
        Query(
            max_length=60,
            description="push the upload as this version of the task set `name` "
            "(letters, digits, '_', '.', '+', '-'); empty or left out: do not",
        ),
    ] = "",
) -> SuiteView:
    media = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media not in MEDIA_TYPES:
        raise HTTPException(
            415,
            f"Content-Type {media or '(none)'!r} is not an archive; send the tar as "
            "application/gzip (gzip'd) or application/x-tar (plain).",
        )
    if not re.fullmatch(VERSION_PATTERN, version):
        # Checked here, not in the parameter's schema: a second pattern there leaves schema
        # tests generating little of this route's input (tests/docker/test_openapi.py).
        raise JobInputError(
            ("query", "version"),
            f"version {version[:60]!r} is not one: letters, digits, '_', '.', '+' and '-'.",
        )
    if version and any(f.names(name) for f in FORMATS.values()):
        raise JobInputError(
            ("query", "name"),
            f"{name!r} is a suite this server ships, which a job's `suite` names first; "
            "push your task set under another name.",
        )
    cap = c.settings.max_suite_archive_bytes
    data = await read_capped(request, cap)

    def check_and_store() -> tuple[SuiteView, bool]:
        try:
            tree = read_suite_tree(
                data,
                max_bytes=cap,
                max_files=DEFAULT_MAX_FILES,
                max_unpacked_bytes=DEFAULT_MAX_UNPACKED_BYTES,
            )
        except (ArchiveError, SuiteTreeError) as exc:
            loc = ("body", exc.entry) if exc.entry is not None else ("body",)
            raise JobInputError(loc, str(exc)) from None
        owner = owner_of(caller.team_id)
        with c.sessions.begin() as session:
            saved = save_upload(
                session, owner=owner, suite_id=tree.id, name=name, kind=tree.kind, data=data
            )
            shown = view(saved.suite, saved.name, len(tree.files), tree.case_ids, tree.refused)
            if not version:
                return shown, saved.created
            try:
                pushed = task_sets.push(session, owner, name, version, saved.suite.sha256)
            except task_sets.VersionTaken as exc:
                # Raised inside the transaction: the upload it began is not kept either.
                raise HTTPException(409, str(exc)) from None
            return shown.model_copy(update={"version": f"{name}@{version}"}), pushed

    shown, created = await run_in_threadpool(check_and_store)
    if not created:
        response.status_code = 200
    return shown


@router.get(
    "/suites/{suite_id}",
    response_model=SuiteView,
    responses=NOT_FOUND,
    summary="An uploaded suite's metadata",
)
def get_suite(suite_id: str, c: Ctx, caller: Caller) -> SuiteView:
    with c.sessions() as session:
        found = uploaded(session, suite_id, owner_of(caller.team_id), any_owner=caller.admin)
        if found is None:
            # The same 404 whether the bytes are stored for another team or not at all.
            raise HTTPException(
                404, f"You have uploaded no suite {suite_id!r}; upload it with POST /v1/suites."
            )
        suite, name = found
        loaded = uploaded_tasks(suite, name)
        files = count_files(suite.archive or b"")
        return view(suite, name, files, sorted(loaded.tasks), loaded.refused)


@router.get(
    "/suite-sets",
    response_model=list[TaskSetView],
    summary="The task sets the caller may read",
    description="The caller's own sets, those an admin shared with its team, and for an "
    "admin every set; each with its versions, oldest push first. A job's `suite` names a "
    "version as `ref@VERSION`, the newest as `ref`.",
)
def list_task_sets(c: Ctx, caller: Caller) -> list[TaskSetView]:
    who = task_sets.Caller(owner_of(caller.team_id), caller.team_id, caller.admin)
    with c.sessions() as session:
        sets: dict[tuple[str, str], list[task_sets.SetVersion]] = {}
        for found in task_sets.readable(session, who):
            sets.setdefault((found.owner, found.name), []).append(found)
        views = []
        for (owner, name), versions in sets.items():
            mine = owner == who.owner
            views.append(
                TaskSetView(
                    name=name,
                    owner=versions[0].owner_name,
                    ref=str(SetRef(name, owner=None if mine else versions[0].owner_name)),
                    versions=[
                        TaskSetVersionView(
                            version=v.version, id=f"sha256:{v.sha256}", pushed_at=v.pushed_at
                        )
                        for v in versions
                    ],
                    shared_with=(
                        task_sets.shares(session, owner, name) if mine or caller.admin else None
                    ),
                )
            )
        return views
