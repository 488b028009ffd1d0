"""Opening paths beneath the workspace without following a symlink anywhere on the way.

The file tools resolve a path first (sandbox.tools.base.resolve_in_workspace) and then
open it. Between the two, a background process of the agent can swap a directory on the
path for a symlink to `/`; a plain open (even with O_NOFOLLOW, which guards only the last
component) would then follow it out of the workspace. So the open itself refuses every
symlink on the path, relative to a descriptor of the workspace root:

- `openat2` with RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS where the
  kernel has it (Linux 5.6+): the kernel resolves the whole path in one call, never above
  the root, and fails with ELOOP at a symlink. NO_SYMLINKS, not only BENEATH: the path was
  resolved already, so a symlink met now is one that appeared since, and the walk below
  (the fallback) can only refuse symlinks, so both ways behave the same.
- otherwise a walk, one component at a time, each directory opened with
  O_PATH | O_DIRECTORY | O_NOFOLLOW relative to the previous one.

Either way a symlink met on the path is an OSError with errno ELOOP. Stdlib only (ctypes).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import stat
from pathlib import Path, PurePosixPath

_SYS_OPENAT2 = 437  # the same number on every architecture (added after the syscall unification)
_RESOLVE_NO_MAGICLINKS = 0x02
_RESOLVE_NO_SYMLINKS = 0x04
_RESOLVE_BENEATH = 0x08
_RESOLVE = _RESOLVE_BENEATH | _RESOLVE_NO_SYMLINKS | _RESOLVE_NO_MAGICLINKS

_DIR_FLAGS = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class _OpenHow(ctypes.Structure):
    _fields_ = [
        ("flags", ctypes.c_uint64),
        ("mode", ctypes.c_uint64),
        ("resolve", ctypes.c_uint64),
    ]


# None until the first call finds out; False when the kernel (or a seccomp profile) answers
# ENOSYS. Tests set it to False to exercise the walk.
openat2_available: bool | None = None
_libc: ctypes.CDLL | None = None


def _components(relative: str | os.PathLike[str]) -> list[str]:
    """The path's names; an absolute path or a `..` is refused, as it could only lead up."""
    path = PurePosixPath(relative)
    if path.is_absolute() or ".." in path.parts:
        raise OSError(errno.EXDEV, "path leads out of the directory", str(relative))
    return [part for part in path.parts if part != "."]


def _openat2(root_fd: int, relative: str, flags: int, mode: int) -> int | None:
    """The descriptor, or None when openat2 cannot be used here."""
    global openat2_available, _libc
    if openat2_available is False:
        return None
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
        _libc.syscall.restype = ctypes.c_long
    # openat2 refuses a mode without O_CREAT (EINVAL), unlike open.
    how = _OpenHow(flags, mode if flags & os.O_CREAT else 0, _RESOLVE)
    fd = _libc.syscall(
        ctypes.c_long(_SYS_OPENAT2),
        ctypes.c_int(root_fd),
        ctypes.c_char_p(os.fsencode(relative or ".")),
        ctypes.byref(how),
        ctypes.c_size_t(ctypes.sizeof(how)),
    )
    if fd >= 0:
        openat2_available = True
        return int(fd)
    code = ctypes.get_errno()
    if code == errno.ENOSYS:
        openat2_available = False
        return None
    if code == errno.EPERM and openat2_available is None:
        # An older engine's seccomp profile may refuse openat2 itself with EPERM; the walk
        # then gives the true answer (a genuine EPERM comes back from it just the same).
        return None
    raise OSError(code, os.strerror(code), relative)


def _open_dir(name: str, dir_fd: int) -> int:
    """An O_PATH descriptor of the directory `name` in `dir_fd`, never through a symlink."""
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
    except NotADirectoryError:
        # O_PATH | O_NOFOLLOW would open a symlink itself, which O_DIRECTORY then refuses:
        # say ELOOP, as openat2 does, when that is what stood in the way.
        if _is_link(name, dir_fd):
            raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), name) from None
        raise


def _is_link(name: str, dir_fd: int) -> bool:
    try:
        return stat.S_ISLNK(os.lstat(name, dir_fd=dir_fd).st_mode)
    except OSError:
        return False


def _walk_to_parent(root_fd: int, names: list[str]) -> int:
    """An O_PATH descriptor of the directory holding the last name (the root for none)."""
    fd = os.dup(root_fd)
    try:
        for name in names[:-1]:
            next_fd = _open_dir(name, fd)
            os.close(fd)
            fd = next_fd
    except OSError:
        os.close(fd)
        raise
    return fd


def _open_walking(root_fd: int, names: list[str], flags: int, mode: int) -> int:
    if not names:
        return os.open(".", flags | os.O_CLOEXEC, dir_fd=root_fd)
    parent = _walk_to_parent(root_fd, names)
    try:
        return os.open(names[-1], flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=parent)
    finally:
        os.close(parent)


def open_beneath(
    root: Path, relative: str | os.PathLike[str], flags: int, mode: int = 0o600
) -> int:
    """os.open of `relative` below the directory `root`, refusing any symlink on the way
    (ELOOP). The caller owns the descriptor."""
    names = _components(relative)
    root_fd = os.open(root, _DIR_FLAGS)
    try:
        fd = _openat2(root_fd, "/".join(names), flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
        if fd is not None:
            return fd
        return _open_walking(root_fd, names, flags, mode)
    except NotADirectoryError:
        # O_DIRECTORY | O_NOFOLLOW on a symlink says ENOTDIR: call it what it is.
        if any(_is_link("/".join(names[: i + 1]), root_fd) for i in range(len(names))):
            raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), str(relative)) from None
        raise
    finally:
        os.close(root_fd)


def makedirs_beneath(root: Path, relative: str | os.PathLike[str], mode: int = 0o700) -> None:
    """Create the missing directories of `relative` below `root`, each with `mode`, one
    component at a time and never through a symlink (ELOOP). An existing non-directory on
    the way is NotADirectoryError."""
    fd = os.open(root, _DIR_FLAGS)
    try:
        for name in _components(relative):
            with contextlib.suppress(FileExistsError):  # then it must be a directory
                os.mkdir(name, mode, dir_fd=fd)
            next_fd = _open_dir(name, fd)
            os.close(fd)
            fd = next_fd
    finally:
        os.close(fd)
