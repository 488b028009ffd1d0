"""A task's agent user, as Harbor gives it: `[agent].user` of the task's image, created when
the image lacks it, and never root.

The root supervisor settles the user before the sandboxed worker drops to it, in a task's
container, whose root file system is writable by root (docs/security/hardening.md). A task
that names no user gets examhall's sandbox user, which is given a name here when the image
has none for its uid, so `whoami` and `id -un` answer as on any system.
"""

from __future__ import annotations

import os
import pwd
from dataclasses import dataclass
from pathlib import Path

from sandbox.workspace import SANDBOX_HOME

PASSWD = Path("/etc/passwd")
GROUP = Path("/etc/group")
# The name the sandbox user gets where the image has no entry for its uid.
SANDBOX_NAME = "examhall-agent"
# Where uids and gids of users created here begin: where Debian's adduser begins.
FIRST_UID = 1000
LAST_UID = 59999


@dataclass(frozen=True)
class AgentUser:
    name: str
    uid: int
    gid: int
    home: str
    # What the supervisor did, for the trial's transcript; None when the image had it.
    note: str | None = None


def settle(name: str | None, sandbox_uid: int, sandbox_gid: int) -> AgentUser:
    """The user the agent runs as: the task's (a name or a uid), or the sandbox user when it
    names none or one that is root, or in root's group, in this image."""
    if not name:
        return _sandbox(sandbox_uid, sandbox_gid)
    try:
        entry = pwd.getpwuid(int(name)) if name.isdigit() else pwd.getpwnam(name)
    except KeyError:
        if not name.isdigit():
            return _create(name)
        # A bare uid, as `docker exec -u 1000` runs one.
        uid = int(name)
        user = AgentUser(name, uid, uid, SANDBOX_HOME)
    else:
        user = AgentUser(entry.pw_name, entry.pw_uid, entry.pw_gid, entry.pw_dir)
    if user.uid == 0 or user.gid == 0:
        fallback = _sandbox(sandbox_uid, sandbox_gid)
        note = (
            f"[agent].user {name!r} is uid {user.uid}, gid {user.gid} in this image; examhall "
            f"never runs the agent as root, so it runs as {fallback.name} (uid {fallback.uid})"
        )
        return AgentUser(fallback.name, fallback.uid, fallback.gid, fallback.home, note)
    return user


def _sandbox(uid: int, gid: int) -> AgentUser:
    try:
        entry = pwd.getpwuid(uid)
        return AgentUser(entry.pw_name, uid, gid, entry.pw_dir)
    except KeyError:
        pass
    if _name_taken(SANDBOX_NAME):
        return AgentUser(str(uid), uid, gid, SANDBOX_HOME)
    _append(GROUP, f"{SANDBOX_NAME}:x:{gid}:\n")
    _append(PASSWD, f"{SANDBOX_NAME}:x:{uid}:{gid}:examhall:{SANDBOX_HOME}:{_shell()}\n")
    return AgentUser(SANDBOX_NAME, uid, gid, SANDBOX_HOME)


def _create(name: str) -> AgentUser:
    """Add `name` as useradd would: a free uid and a group of the same name and number, a
    home under /home that it owns."""
    if not _valid_name(name):
        raise ValueError(f"[agent].user {name!r} is not a user name this image can have")
    taken_uids = {entry.pw_uid for entry in pwd.getpwall()}
    taken_gids = _group_ids()
    number = next(
        (n for n in range(FIRST_UID, LAST_UID) if n not in taken_uids and n not in taken_gids),
        None,
    )
    if number is None:
        raise ValueError(f"no free uid between {FIRST_UID} and {LAST_UID} for {name!r}")
    home = Path("/home") / name
    _append(GROUP, f"{name}:x:{number}:\n")
    _append(PASSWD, f"{name}:x:{number}:{number}::{home}:{_shell()}\n")
    home.parent.mkdir(mode=0o755, exist_ok=True)
    home.mkdir(mode=0o755, exist_ok=True)
    os.chown(home, number, number)
    return AgentUser(name, number, number, str(home), f"created user {name} (uid {number})")


def _valid_name(name: str) -> bool:
    # useradd's rule on Debian, less its lenience: a letter or _ first, then these.
    return (
        0 < len(name) <= 32
        and (name[0].isascii() and (name[0].isalpha() or name[0] == "_"))
        and all(c.isascii() and (c.isalnum() or c in "_.-") for c in name)
    )


def _name_taken(name: str) -> bool:
    try:
        pwd.getpwnam(name)
    except KeyError:
        return any(line.split(":", 1)[0] == name for line in _lines(GROUP))
    return True


def _group_ids() -> set[int]:
    ids = set()
    for line in _lines(GROUP):
        parts = line.split(":")
        if len(parts) > 2 and parts[2].isdigit():
            ids.add(int(parts[2]))
    return ids


def _lines(path: Path) -> list[str]:
    try:
        return path.read_text(errors="replace").splitlines()
    except OSError:
        return []


def _append(path: Path, line: str) -> None:
    text = path.read_text(errors="replace") if path.exists() else ""
    prefix = "" if not text or text.endswith("\n") else "\n"
    with path.open("a") as handle:
        handle.write(prefix + line)


def _shell() -> str:
    return "/bin/bash" if os.path.exists("/bin/bash") else "/bin/sh"
