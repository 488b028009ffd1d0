"""Suites as archives: a directory packed into a deterministic gzip'd tar, and an uploaded
archive read in memory, every entry checked, before any of it touches a disk.

What an archive may hold: regular files and directories, under relative paths without `..`.
Refused, each with a message naming the entry: absolute paths, `..` components, hard links
(of any target: a tar's hard link is an extraction-time reference the reader would have to
trust), symbolic links whose target leaves the root, device, fifo and other special entries,
an entry twice, a file where another entry needs a directory, more than `max_files` entries,
and more than `max_unpacked_bytes` unpacked (counted as the bytes are decompressed, never
taken from a header).

Symbolic links that stay inside the root are resolved: the link becomes a regular file with
its target's content and executable bit (a link to a directory is refused). So what
`read_archive` returns, and what `write_tree` writes, holds no link at all, and a tree packed
by `pack_directory` (which resolves them the same way) reads back as the same files.

Directories are implied by the files under them: an empty directory is not kept.

The content address of an uploaded archive is the sha256 of its bytes as uploaded.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import posixpath
import stat
import tarfile
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO

ID_PREFIX = "sha256:"
DEFAULT_MAX_FILES = 10_000
DEFAULT_MAX_UNPACKED_BYTES = 256 * 1024 * 1024
# Names never packed: version control, caches and editor droppings.
SKIPPED_NAMES = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        "__pycache__",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
        ".DS_Store",
    }
)
SKIPPED_SUFFIXES = (".pyc", ".pyo")
# Link chains longer than this are refused as a loop (Linux's own limit is 40).
MAX_LINK_HOPS = 40
# Tar headers (512 bytes each, more for long names) are allowed this much per entry, on top
# of the files' content, in the count of decompressed bytes.
HEADER_ALLOWANCE = 4096
_CHUNK = 64 * 1024
GZIP_MAGIC = b"\x1f\x8b"


class ArchiveError(ValueError):
    """An archive (or a directory to pack) that cannot be a suite; `entry` is the path of the
    entry at fault, when one is."""

    def __init__(self, reason: str, entry: str | None = None) -> None:
        super().__init__(f"Archive entry {entry!r}: {reason}" if entry is not None else reason)
        self.entry = entry
        self.reason = reason


@dataclass(frozen=True)
class ArchiveFile:
    data: bytes
    executable: bool = False

    @property
    def mode(self) -> int:
        return 0o755 if self.executable else 0o644


def archive_id(data: bytes) -> str:
    """The content address of an archive: `sha256:<hex>` of its bytes as uploaded."""
    return ID_PREFIX + hashlib.sha256(data).hexdigest()


def is_archive_id(value: str) -> bool:
    digest = value.removeprefix(ID_PREFIX)
    return (
        value.startswith(ID_PREFIX)
        and len(digest) == 64
        and all(c in "0123456789abcdef" for c in digest)
    )


# ---- packing --------------------------------------------------------------------------


def _skipped(name: str) -> bool:
    return name in SKIPPED_NAMES or name.endswith(SKIPPED_SUFFIXES)


def _inside(root: str, path: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def _tree_files(root: str) -> Iterator[tuple[str, str]]:
    """(archive path, filesystem path of the content) of every file under root, links
    inside it resolved; what cannot be packed is an ArchiveError naming it."""
    pending = [""]
    while pending:
        relative = pending.pop()
        with os.scandir(os.path.join(root, relative) if relative else root) as entries:
            found = sorted(entries, key=lambda e: e.name)
        for entry in found:
            if _skipped(entry.name):
                continue
            name = f"{relative}/{entry.name}" if relative else entry.name
            if entry.is_symlink():
                target = os.path.realpath(entry.path)
                shown = os.readlink(entry.path)
                if not _inside(root, target):
                    raise ArchiveError(
                        f"is a symbolic link to {shown!r}, outside the directory; replace it "
                        "with a copy of what it points to",
                        name,
                    )
                if not os.path.exists(target):
                    raise ArchiveError(f"is a symbolic link to {shown!r}, which is missing", name)
                if os.path.isdir(target):
                    raise ArchiveError(
                        f"is a symbolic link to the directory {shown!r}; replace it with a copy",
                        name,
                    )
                if not stat.S_ISREG(os.stat(target).st_mode):
                    raise ArchiveError(f"is a symbolic link to a special file {shown!r}", name)
                yield name, target
            elif entry.is_dir(follow_symlinks=False):
                pending.append(name)
            elif entry.is_file(follow_symlinks=False):
                yield name, entry.path
            else:
                raise ArchiveError(
                    "is a special file (a device, fifo or socket); a suite holds regular "
                    "files and directories only",
                    name,
                )


def pack_directory(path: str | os.PathLike[str]) -> bytes:
    """The directory as a gzip'd tar that depends only on its files' paths, content and
    executable bits: entries sorted, mtime 0, uid and gid 0, no owner names, modes 0644 or
    0755, links inside the directory stored as copies of their targets, and no gzip name or
    time. Packing the same tree twice gives the same bytes, so the same content address."""
    root = os.path.realpath(path)
    if not os.path.isdir(root):
        raise ArchiveError(f"{os.fspath(path)} is not a directory.")
    files = sorted(_tree_files(root))
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, source in files:
            with open(source, "rb") as handle:
                data = handle.read()
                executable = bool(os.fstat(handle.fileno()).st_mode & stat.S_IXUSR)
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mtime = 0
            info.mode = 0o755 if executable else 0o644
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            tar.addfile(info, io.BytesIO(data))
    out = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=out, mtime=0) as compressed:
        compressed.write(raw.getvalue())
    return out.getvalue()


# ---- reading --------------------------------------------------------------------------


class _Unpacked(Exception):
    """The decompressed stream passed its cap."""


class _Counted(io.RawIOBase):
    """The decompressed stream, counted as it is read: past `limit` bytes it raises, so a
    decompression bomb stops at the cap whatever its headers say."""

    def __init__(self, source: IO[bytes] | gzip.GzipFile, limit: int) -> None:
        self.source = source
        self.limit = limit
        self.seen = 0

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        if size is None or size < 0 or size > _CHUNK:
            size = _CHUNK  # never one huge read: the count must see every chunk
        data = self.source.read(size)
        self.seen += len(data)
        if self.seen > self.limit:
            raise _Unpacked
        return data


def clean_path(name: str) -> str:
    """An entry's path relative to the root ('./' and '.' parts dropped), or an ArchiveError
    naming it when it is absolute, climbs with '..', or is not a path at all."""
    if not name or "\x00" in name:
        raise ArchiveError("has an empty or NUL-containing name", name)
    if name.startswith("/") or (len(name) > 1 and name[1] == ":"):
        raise ArchiveError("has an absolute path; entries must be relative to the root", name)
    if "\\" in name:
        raise ArchiveError("has a backslash in its path; use '/' between parts", name)
    parts = [part for part in name.split("/") if part not in ("", ".")]
    if ".." in parts:
        raise ArchiveError("has a '..' component, which would leave the root", name)
    return "/".join(parts)


def _kind(member: tarfile.TarInfo) -> str:
    if member.ischr() or member.isblk():
        return "a device"
    if member.isfifo():
        return "a fifo"
    return f"of tar type {member.type!r}"


def _budget_error(limit: int) -> ArchiveError:
    return ArchiveError(
        f"The archive unpacks to more than {limit} bytes, the limit; split the suite or "
        "leave large generated files out."
    )


def read_archive(
    data: bytes,
    *,
    max_bytes: int,
    max_files: int = DEFAULT_MAX_FILES,
    max_unpacked_bytes: int = DEFAULT_MAX_UNPACKED_BYTES,
) -> dict[str, ArchiveFile]:
    """The archive's files (gzip'd or plain tar), by path, sorted; links inside the root
    resolved to copies. Anything the module docstring refuses is an ArchiveError."""
    if len(data) > max_bytes:
        raise ArchiveError(
            f"The archive is {len(data)} bytes; the limit is {max_bytes} "
            "(EXAMHALL_MAX_SUITE_ARCHIVE_BYTES)."
        )
    source: IO[bytes] | gzip.GzipFile = io.BytesIO(data)
    if data.startswith(GZIP_MAGIC):
        source = gzip.GzipFile(fileobj=source, mode="rb")
    stream = _Counted(source, max_unpacked_bytes + HEADER_ALLOWANCE * (max_files + 1))
    files: dict[str, ArchiveFile] = {}
    links: dict[str, str] = {}  # path -> its target's path, both relative to the root
    dirs: set[str] = set()
    unpacked = 0
    entries = 0
    current: str | None = None
    try:
        with tarfile.open(fileobj=stream, mode="r|") as tar:
            for member in tar:
                current = member.name
                entries += 1
                if entries > max_files:
                    raise ArchiveError(
                        f"is past the limit of {max_files} entries in an archive", member.name
                    )
                name = clean_path(member.name)
                if not name:
                    if member.isdir():
                        continue  # the root itself ('./')
                    raise ArchiveError(
                        "names the root itself, which must be a directory", member.name
                    )
                if name in files or name in links or (name in dirs and not member.isdir()):
                    raise ArchiveError("appears twice in the archive", member.name)
                if member.isdir():
                    dirs.add(name)
                elif member.islnk():
                    raise ArchiveError(
                        f"is a hard link (to {member.linkname!r}); archives may not hold hard "
                        "links, store a copy of the file instead",
                        member.name,
                    )
                elif member.issym():
                    links[name] = _link_target(name, member.linkname, member.name)
                elif member.isreg():
                    if member.size > max_unpacked_bytes - unpacked:
                        raise _budget_error(max_unpacked_bytes)
                    content = _read_member(tar, member)
                    unpacked += len(content)
                    files[name] = ArchiveFile(content, bool(member.mode & 0o111))
                else:
                    raise ArchiveError(
                        f"is {_kind(member)}; a suite holds regular files and directories only",
                        member.name,
                    )
    except _Unpacked:
        raise _budget_error(max_unpacked_bytes) from None
    except (tarfile.TarError, OSError, EOFError, zlib.error) as exc:
        where = f" (after entry {current!r})" if current is not None else ""
        raise ArchiveError(
            f"The body is not a readable tar archive, gzip'd or plain{where}: {exc}. "
            "Make one with `tar czf suite.tar.gz -C DIR .` or `examhall submit DIR`."
        ) from None
    _resolve_links(files, links, dirs, max_unpacked_bytes - unpacked, max_unpacked_bytes)
    _check_parents(files, dirs)
    return dict(sorted(files.items()))


def _read_member(tar: tarfile.TarFile, member: tarfile.TarInfo) -> bytes:
    handle = tar.extractfile(member)
    if handle is None:  # pragma: no cover - a regular file always has content
        return b""
    chunks: list[bytes] = []
    while chunk := handle.read(_CHUNK):
        chunks.append(chunk)
    return b"".join(chunks)


def _link_target(name: str, target: str, shown: str) -> str:
    if not target or target.startswith("/"):
        raise ArchiveError(
            f"is a symbolic link to the absolute path {target!r}, outside the root", shown
        )
    joined = posixpath.normpath(posixpath.join(posixpath.dirname(name), target))
    if joined == ".." or joined.startswith("../") or joined == ".":
        raise ArchiveError(f"is a symbolic link to {target!r}, outside the root", shown)
    return joined


def _resolve_links(
    files: dict[str, ArchiveFile], links: dict[str, str], dirs: set[str], budget: int, limit: int
) -> None:
    """Each link replaced by a copy of the file it ends at, whose bytes count against the
    `budget` left of the unpacked `limit`: a thousand links to one large file would otherwise
    write it a thousand times."""
    # Every directory the entries imply, so that a link to one is known for what it is.
    implied = set(dirs)
    for path in [*files, *links]:
        parent = posixpath.dirname(path)
        while parent and parent not in implied:
            implied.add(parent)
            parent = posixpath.dirname(parent)
    for name, first in sorted(links.items()):
        target = first
        for _ in range(MAX_LINK_HOPS):
            if target not in links:
                break
            target = links[target]
        else:
            raise ArchiveError("is a symbolic link in a loop", name)
        if target in implied:
            raise ArchiveError(
                f"is a symbolic link to the directory {first!r}; store a copy instead", name
            )
        found = files.get(target)
        if found is None:
            raise ArchiveError(
                f"is a symbolic link to {first!r}, which the archive does not hold", name
            )
        budget -= len(found.data)
        if budget < 0:
            raise ArchiveError(
                "is a symbolic link whose copy would take the archive past its limit of "
                f"{limit} unpacked bytes",
                name,
            )
    for name, first in links.items():
        target = first
        while target in links:
            target = links[target]
        files[name] = files[target]


def _check_parents(files: Mapping[str, ArchiveFile], dirs: set[str]) -> None:
    for name in files:
        if name in dirs:
            raise ArchiveError("is both a file and a directory in the archive", name)
        parent = posixpath.dirname(name)
        while parent:
            if parent in files:
                raise ArchiveError(f"is inside {parent!r}, which is a file", name)
            parent = posixpath.dirname(parent)


# ---- writing --------------------------------------------------------------------------

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def write_tree(files: Mapping[str, ArchiveFile], into: Path) -> None:
    """Write the files under `into` (created if missing), never outside it: every path is
    checked again, every directory is opened relative to its parent's descriptor without
    following a link, and every file is created new (O_EXCL | O_NOFOLLOW), so a link or a
    file already in the way is an error rather than a way out. Modes are 0644/0755 (0755
    for directories), whatever the umask."""
    into.mkdir(parents=True, exist_ok=True)
    root = os.open(into, _DIR_FLAGS)
    try:
        for name, file in files.items():
            clean = clean_path(name)
            if not clean:
                raise ArchiveError("names the root itself, which must be a directory", name)
            *parents, leaf = clean.split("/")
            directory = os.dup(root)
            try:
                for part in parents:
                    try:
                        os.mkdir(part, 0o755, dir_fd=directory)
                        made = True
                    except FileExistsError:
                        made = False
                    try:
                        child = os.open(part, _DIR_FLAGS, dir_fd=directory)
                    except OSError as exc:
                        raise ArchiveError(
                            f"cannot be written: {part!r} is in the way ({exc.strerror})", name
                        ) from None
                    os.close(directory)
                    directory = child
                    if made:
                        os.fchmod(directory, 0o755)
                try:
                    handle = os.open(leaf, _FILE_FLAGS, file.mode, dir_fd=directory)
                except OSError as exc:
                    raise ArchiveError(f"cannot be written: {exc.strerror}", name) from None
                try:
                    os.fchmod(handle, file.mode)
                    view = memoryview(file.data)
                    while view:
                        view = view[os.write(handle, view) :]
                finally:
                    os.close(handle)
            finally:
                os.close(directory)
    finally:
        os.close(root)


def count_files(data: bytes) -> int:
    """The files `read_archive` found in an archive it accepted (links count, as the copies
    they became), without holding their content: for showing a stored suite."""
    source: IO[bytes] | gzip.GzipFile = io.BytesIO(data)
    if data.startswith(GZIP_MAGIC):
        source = gzip.GzipFile(fileobj=source, mode="rb")
    with tarfile.open(fileobj=source, mode="r|") as tar:
        return sum(1 for member in tar if member.isreg() or member.issym())
