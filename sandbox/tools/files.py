"""The file tools: read, write, edit, ls, find and grep, all confined to the workspace.

Every path goes through `resolve_in_workspace`, so `..`, absolute paths and symlinks that
lead out of the workspace are a ToolError, never a file outside it. The resolved path is
then opened beneath a descriptor of the workspace root refusing every symlink on the way
(sandbox.tools.beneath), so a symlink the agent swaps in between the check and the open
cannot lead out either. Walks (find, grep) go by directory descriptor (os.fwalk) and do not
follow symlinks, so a link pointing out cannot leak what lies behind it.
"""

from __future__ import annotations

import errno
import os
import re
import stat
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, BinaryIO

from sandbox.tools.base import (
    Tool,
    ToolContext,
    ToolError,
    cap_output,
    optional_bool,
    optional_int,
    optional_str,
    required_str,
    resolve_in_workspace,
)
from sandbox.tools.beneath import makedirs_beneath, open_beneath

# More entries than this are noise to a model and cost tokens; it should narrow the search.
MAX_RESULTS = 1000
# grep shows at most this much of one line: minified files have megabyte-long lines.
MAX_LINE_CHARS = 500
# Like git and grep: a NUL byte in the first 8 KiB means a binary file.
BINARY_SNIFF_BYTES = 8192

# O_NONBLOCK: opening a FIFO the agent made must not hang the worker. (open_beneath adds
# O_NOFOLLOW, for the last component as for every other.)
_OPEN_FLAGS = os.O_NONBLOCK | os.O_CLOEXEC


# ----- helpers -------------------------------------------------------------------------


def _shown(ctx: ToolContext, path: Path) -> str:
    """`path` as the model should see it: relative to the workspace."""
    relative = path.relative_to(ctx.workspace.resolve())
    return relative.as_posix() if relative.parts else "."


def _prefix(shown_dir: str) -> str:
    """What to put before a path relative to the directory shown as `shown_dir`."""
    return "" if shown_dir == "." else shown_dir + "/"


def _beneath(ctx: ToolContext, path: Path) -> Path:
    """A resolved workspace path as the root-relative path open_beneath takes."""
    return path.relative_to(ctx.workspace.resolve())


def _open_error(exc: OSError, shown: str, verb: str) -> ToolError:
    if exc.errno in (errno.ELOOP, errno.EXDEV):
        return ToolError(
            f"Cannot {verb} {shown}: a symlink appeared on its path after the path was "
            "checked, and the file tools do not follow one they have not checked. Run the "
            "tool again once nothing is changing the workspace."
        )
    if isinstance(exc, FileNotFoundError):
        return ToolError(f"File not found: {shown}. Use ls or find to see which files exist.")
    if isinstance(exc, IsADirectoryError):
        return ToolError(f"{shown} is a directory, not a file. Use ls to list it.")
    if isinstance(exc, PermissionError):
        return ToolError(f"Cannot {verb} {shown}: permission denied.")
    return ToolError(f"Cannot {verb} {shown}: {exc.strerror or exc}.")


def _open_regular(ctx: ToolContext, path: Path, shown: str, flags: int, verb: str) -> BinaryIO:
    """Open the resolved workspace path `path`, which must be a regular file, as a binary
    stream, without following any symlink on the way."""
    try:
        fd = open_beneath(ctx.workspace.resolve(), _beneath(ctx, path), flags | _OPEN_FLAGS)
    except OSError as exc:
        raise _open_error(exc, shown, verb) from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        if stat.S_ISDIR(mode):
            raise ToolError(f"{shown} is a directory, not a file. Use ls to list it.")
        raise ToolError(f"Cannot {verb} {shown}: it is not a regular file.")
    # Only the open had to be non-blocking; reads and writes of a regular file never block.
    os.set_blocking(fd, True)
    return os.fdopen(fd, "rb" if flags == os.O_RDONLY else "wb")


def _require_dir(path: Path, shown: str) -> None:
    if path.is_dir():
        return
    if path.exists():
        raise ToolError(f"{shown} is a file, not a directory. Use read to view it.")
    raise ToolError(f"Directory not found: {shown}. Use ls to see which directories exist.")


def _glob_regex(pattern: str) -> re.Pattern[str]:
    """A regex for a glob over '/'-separated paths: `*` and `?` stay within one path
    segment, a `**` segment spans any number of them (including none)."""
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        at_segment_start = i == 0 or pattern[i - 1] == "/"
        if at_segment_start and pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif at_segment_start and pattern.startswith("**", i) and i + 2 == n:
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        elif pattern[i] == "[":
            start = i + 1
            if start < n and pattern[start] in "!^":
                start += 1
            if start < n and pattern[start] == "]":  # a leading ']' is a member, as in fnmatch
                start += 1
            end = pattern.find("]", start)
            if end == -1:
                out.append(re.escape("["))
                i += 1
                continue
            body = pattern[i + 1 : end]
            negate = body[:1] in ("!", "^")
            members = "".join("-" if c == "-" else re.escape(c) for c in body[negate:])
            out.append(f"[{'^' if negate else ''}{members}]")
            i = end + 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out))


class _PathFilter:
    """A glob as the model means it: without a '/', it matches a name at any depth
    ("*.py"); with one, it matches the path relative to the searched directory."""

    def __init__(self, glob: str, argument: str) -> None:
        if glob.startswith("/"):
            raise ToolError(
                f"Argument '{argument}' must be relative to the searched path, like "
                f"'*.py' or 'src/**/*.py', not {glob!r}."
            )
        glob = glob.removeprefix("./")
        self._whole_path = "/" in glob
        self._regex = _glob_regex(glob)

    def matches(self, relative: str) -> bool:
        subject = relative if self._whole_path else relative.rsplit("/", 1)[-1]
        return self._regex.fullmatch(subject) is not None


def _walk(ctx: ToolContext, top: Path) -> Iterator[tuple[Path, str, bool]]:
    """(path, path relative to `top`, is a directory) for everything below `top`, in
    sorted order, without following symlinks: a link to a directory is listed, never
    entered, so a link out of the workspace leads nowhere. By descriptor (os.fwalk), so a
    directory swapped for a symlink while the walk runs is not entered either."""
    try:
        top_fd = open_beneath(
            ctx.workspace.resolve(), _beneath(ctx, top), os.O_RDONLY | os.O_DIRECTORY
        )
    except OSError as exc:
        raise _open_error(exc, _shown(ctx, top), "search") from None
    try:
        for dirpath, dirnames, filenames, _fd in os.fwalk(
            ".", dir_fd=top_fd, follow_symlinks=False
        ):
            dirnames.sort()
            relative_base = os.path.normpath(dirpath)
            base = top if relative_base == "." else top / relative_base
            prefix = "" if relative_base == "." else relative_base + "/"
            entries = [(name, True) for name in dirnames] + [(name, False) for name in filenames]
            for name, is_dir in sorted(entries):
                yield base / name, prefix + name, is_dir
    finally:
        os.close(top_fd)


def _capped_list(lines: list[str], ctx: ToolContext, what: str, hint: str) -> str:
    shown = lines[:MAX_RESULTS]
    text = cap_output("\n".join(shown), ctx.output_limit)
    if len(lines) > MAX_RESULTS:
        text += f"\n[{len(lines) - MAX_RESULTS} more {what} not shown; {hint}]"
    return text


# ----- read ----------------------------------------------------------------------------


def _read(args: Mapping[str, Any], ctx: ToolContext) -> str:
    path = resolve_in_workspace(ctx.workspace, required_str(args, "path"))
    offset = optional_int(args, "offset", minimum=1) or 1
    limit = optional_int(args, "limit", minimum=1)
    shown = _shown(ctx, path)

    kept: list[str] = []
    used = 0
    last_shown = 0
    total = 0
    full = False
    with _open_regular(ctx, path, shown, os.O_RDONLY, "read") as file:
        # Count every line for the continuation hint, but keep only what will be shown.
        for total, raw in enumerate(file, start=1):
            if total < offset or full:
                continue
            if (limit is not None and len(kept) >= limit) or used + len(raw) > ctx.output_limit:
                if not kept:  # one line longer than the whole budget: show its start
                    kept.append(cap_output(raw.decode("utf-8", "replace"), ctx.output_limit))
                    last_shown = total
                full = True
                continue
            kept.append(raw.decode("utf-8", "replace"))
            used += len(raw)
            last_shown = total

    if total == 0:
        return "(empty file)"
    if offset > total:
        raise ToolError(
            f"offset {offset} is past the end of {shown}, which has {total} lines. "
            f"Use an offset between 1 and {total}."
        )
    text = "".join(kept)
    if last_shown < total:
        if not text.endswith("\n"):
            text += "\n"
        text += (
            f"[showing lines {offset}-{last_shown} of {total}; "
            f"use offset={last_shown + 1} to read more]"
        )
    return text


# ----- write ---------------------------------------------------------------------------


def _make_parents(ctx: ToolContext, path: Path) -> None:
    """Create the missing directories above `path`, each private to the sandbox user, one
    at a time beneath the workspace root and never through a symlink. (os.makedirs would
    give the intermediate ones the umask's default mode, and follow symlinks.)"""
    try:
        makedirs_beneath(ctx.workspace.resolve(), _beneath(ctx, path.parent), 0o700)
    except NotADirectoryError:
        in_the_way = next(
            (d for d in reversed(path.parents) if d.exists() and not d.is_dir()), path.parent
        )
        raise ToolError(
            f"Cannot write {_shown(ctx, path)}: {_shown(ctx, in_the_way)} is a file, "
            "not a directory."
        ) from None
    except OSError as exc:
        raise _open_error(exc, _shown(ctx, path.parent), "create directory") from None


def _write(args: Mapping[str, Any], ctx: ToolContext) -> str:
    path = resolve_in_workspace(ctx.workspace, required_str(args, "path"))
    content = required_str(args, "content", allow_empty=True)
    shown = _shown(ctx, path)
    if path.is_dir():
        raise ToolError(f"{shown} is a directory; give the path of a file to write.")
    _make_parents(ctx, path)
    data = content.encode("utf-8")
    # A new file gets 0600; an existing one keeps its mode, so a script the agent made
    # executable stays executable when rewritten.
    with _open_regular(ctx, path, shown, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, "write") as file:
        file.write(data)
    return f"Wrote {len(data)} bytes to {shown}"


# ----- edit ----------------------------------------------------------------------------


def _edit(args: Mapping[str, Any], ctx: ToolContext) -> str:
    path = resolve_in_workspace(ctx.workspace, required_str(args, "path"))
    old_text = required_str(args, "old_text")
    new_text = required_str(args, "new_text", allow_empty=True)
    shown = _shown(ctx, path)
    if old_text == new_text:
        raise ToolError("old_text and new_text are identical, so there is nothing to change.")

    with _open_regular(ctx, path, shown, os.O_RDONLY, "read") as file:
        data = file.read()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ToolError(
            f"{shown} is not UTF-8 text; edit only changes text files. Use write to replace it."
        ) from None

    count = text.count(old_text)
    if count == 0:
        raise ToolError(
            f"old_text not found in {shown}. It must match the file exactly, including "
            "whitespace, indentation and line breaks; read the file and copy the text."
        )
    if count > 1:
        raise ToolError(
            f"old_text occurs {count} times in {shown}; it must occur exactly once. "
            "Add surrounding lines to old_text so it matches only the place to change."
        )
    updated = text.replace(old_text, new_text, 1)
    # Rewrite in place rather than replace the file, so its mode and owner stay as they were.
    with _open_regular(ctx, path, shown, os.O_WRONLY | os.O_TRUNC, "write") as file:
        file.write(updated.encode("utf-8"))
    line = text.count("\n", 0, text.index(old_text)) + 1
    return f"Edited {shown}: replaced 1 occurrence at line {line}."


# ----- ls ------------------------------------------------------------------------------


def _ls(args: Mapping[str, Any], ctx: ToolContext) -> str:
    path = resolve_in_workspace(ctx.workspace, optional_str(args, "path", "."))
    shown = _shown(ctx, path)
    _require_dir(path, shown)
    try:
        fd = open_beneath(
            ctx.workspace.resolve(), _beneath(ctx, path), os.O_RDONLY | os.O_DIRECTORY
        )
        try:
            with os.scandir(fd) as entries:
                names = sorted(entry.name + ("/" if entry.is_dir() else "") for entry in entries)
        finally:
            os.close(fd)
    except OSError as exc:
        raise _open_error(exc, shown, "list") from None
    if not names:
        return "(empty directory)"
    return _capped_list(names, ctx, "entries", "use find with a pattern to narrow the listing")


# ----- find ----------------------------------------------------------------------------


def _find(args: Mapping[str, Any], ctx: ToolContext) -> str:
    pattern = required_str(args, "pattern")
    top = resolve_in_workspace(ctx.workspace, optional_str(args, "path", "."))
    shown = _shown(ctx, top)
    _require_dir(top, shown)
    matcher = _PathFilter(pattern, "pattern")
    prefix = _prefix(shown)
    found = sorted(
        prefix + relative + ("/" if is_dir else "")
        for _, relative, is_dir in _walk(ctx, top)
        if matcher.matches(relative)
    )
    if not found:
        return f"No paths match {pattern!r} under {shown}."
    return _capped_list(found, ctx, "matches", "use a narrower pattern or path")


# ----- grep ----------------------------------------------------------------------------


def _grep_file(ctx: ToolContext, path: Path, regex: re.Pattern[str]) -> Iterator[tuple[int, str]]:
    """(line number, line) for each matching line; nothing for binary or unreadable files."""
    try:
        file = _open_regular(ctx, path, "", os.O_RDONLY, "read")
    except ToolError:
        return  # a FIFO, a vanished or unreadable file: nothing to search
    with file:
        if b"\0" in file.read(BINARY_SNIFF_BYTES):
            return
        file.seek(0)
        for number, raw in enumerate(file, start=1):
            line = raw.decode("utf-8", "replace").rstrip("\r\n")
            if regex.search(line):
                if len(line) > MAX_LINE_CHARS:
                    line = line[:MAX_LINE_CHARS] + " [line truncated]"
                yield number, line


def _grep(args: Mapping[str, Any], ctx: ToolContext) -> str:
    pattern = required_str(args, "pattern")
    top = resolve_in_workspace(ctx.workspace, optional_str(args, "path", "."))
    glob = args.get("glob")
    matcher = None if glob is None else _PathFilter(required_str(args, "glob"), "glob")
    flags = re.IGNORECASE if optional_bool(args, "ignore_case", False) else 0
    shown = _shown(ctx, top)
    try:
        regex = re.compile(pattern, flags)
    except re.error as exc:
        raise ToolError(
            f"Invalid regular expression {pattern!r}: {exc}. The pattern is a Python regex; "
            r"escape special characters such as ( [ . * with a backslash, e.g. \(."
        ) from None

    if top.is_file():
        files = [(top, shown)]
    else:
        _require_dir(top, shown)
        prefix = _prefix(shown)
        files = [
            (path, prefix + relative)
            for path, relative, is_dir in _walk(ctx, top)
            if not is_dir
            and not path.is_symlink()  # its target may lie outside the workspace
            and (matcher is None or matcher.matches(relative))
        ]

    hits: list[str] = []
    used = 0
    stopped = False
    for path, path_shown in files:
        for number, line in _grep_file(ctx, path, regex):
            hit = f"{path_shown}:{number}:{line}"
            # Stop early: past either cap nothing more would be shown anyway.
            if len(hits) >= MAX_RESULTS or used > ctx.output_limit:
                stopped = True
                break
            hits.append(hit)
            used += len(hit.encode("utf-8")) + 1
        if stopped:
            break

    if not hits:
        return f"No matches for {pattern!r} under {shown}."
    text = cap_output("\n".join(hits), ctx.output_limit)
    if stopped:
        text += (
            f"\n[search stopped after {len(hits)} matching lines; there are more. "
            "Use a narrower pattern, path or glob.]"
        )
    return text


# ----- the tools -----------------------------------------------------------------------

_PATH_IN_WORKSPACE = "Relative to the workspace; absolute paths must lie inside it."

READ = Tool(
    name="read",
    description=(
        "Read a text file in the workspace. Returns its contents; long files are cut off "
        "with a note saying which offset to read next. Use offset and limit to read part "
        "of a large file."
    ),
    parameters={
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": f"File to read. {_PATH_IN_WORKSPACE}"},
            "offset": {
                "type": "integer",
                "minimum": 1,
                "description": "Line number to start at (1-based). Default 1.",
            },
            "limit": {
                "type": "integer",
                "minimum": 1,
                "description": "Maximum number of lines to return. Default: all that fit.",
            },
        },
        "required": ["path"],
        "additionalProperties": False,
    },
    run=_read,
)

WRITE = Tool(
    name="write",
    description=(
        "Write a file in the workspace, replacing it if it exists. Missing parent "
        "directories are created. Use edit for a small change to an existing file."
    ),
    parameters={
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": f"File to write. {_PATH_IN_WORKSPACE}"},
            "content": {"type": "string", "description": "The complete new file contents."},
        },
        "required": ["path", "content"],
        "additionalProperties": False,
    },
    run=_write,
)

EDIT = Tool(
    name="edit",
    description=(
        "Replace one exact piece of text in a file. old_text must occur exactly once in "
        "the file, matching whitespace and line breaks exactly; include enough "
        "surrounding lines to make it unique."
    ),
    parameters={
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": f"File to edit. {_PATH_IN_WORKSPACE}"},
            "old_text": {
                "type": "string",
                "description": "Text to replace; must occur exactly once in the file.",
            },
            "new_text": {"type": "string", "description": "Text to put in its place."},
        },
        "required": ["path", "old_text", "new_text"],
        "additionalProperties": False,
    },
    run=_edit,
)

LS = Tool(
    name="ls",
    description=(
        "List a directory in the workspace, sorted by name. Directories end with '/'. "
        "Hidden entries are included."
    ),
    parameters={
        "type": "object",
        "properties": {
            "path": {
                "type": "string",
                "description": f"Directory to list. Default '.'. {_PATH_IN_WORKSPACE}",
            },
        },
        "additionalProperties": False,
    },
    run=_ls,
)

FIND = Tool(
    name="find",
    description=(
        "Find files and directories by glob. A pattern without '/' matches names at any "
        "depth ('*.py'); one with '/' matches the path below the searched directory, "
        "where '**' spans directories ('src/**/*.md'). Returns workspace-relative paths, "
        f"sorted, at most {MAX_RESULTS}. Symlinks are listed but not followed."
    ),
    parameters={
        "type": "object",
        "properties": {
            "pattern": {"type": "string", "description": "Glob, e.g. '*.py' or '**/*.md'."},
            "path": {
                "type": "string",
                "description": f"Directory to search. Default '.'. {_PATH_IN_WORKSPACE}",
            },
        },
        "required": ["pattern"],
        "additionalProperties": False,
    },
    run=_find,
)

GREP = Tool(
    name="grep",
    description=(
        "Search file contents with a Python regular expression. Returns matching lines as "
        f"'path:line_number:line', at most {MAX_RESULTS}. Binary files and symlinks are "
        "skipped."
    ),
    parameters={
        "type": "object",
        "properties": {
            "pattern": {"type": "string", "description": "Python regular expression."},
            "path": {
                "type": "string",
                "description": f"File or directory to search. Default '.'. {_PATH_IN_WORKSPACE}",
            },
            "glob": {
                "type": "string",
                "description": "Only search files matching this glob, e.g. '*.py'.",
            },
            "ignore_case": {
                "type": "boolean",
                "description": "Match case-insensitively. Default false.",
            },
        },
        "required": ["pattern"],
        "additionalProperties": False,
    },
    run=_grep,
)
