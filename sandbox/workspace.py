"""Seeding the agent's workspace with the case's fixture files."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path, PurePosixPath

from sandbox.protocol import WORKSPACE_DIR


class FixtureError(ValueError):
    pass


def fixture_target(workspace: Path, name: str) -> Path:
    """Where a fixture goes; refuses empty, absolute and escaping names (like pi-evals)."""
    if not name or not name.strip():
        raise FixtureError("Workspace fixture has an empty name.")
    pure = PurePosixPath(name)
    if pure.is_absolute():
        raise FixtureError(f"Workspace fixture has an absolute path: {name}")
    target = (workspace / pure).resolve()
    root = workspace.resolve()
    if root not in target.parents:
        raise FixtureError(f"Workspace fixture escapes the workspace: {name}")
    return target


def prepare_directory(path: Path, uid: int, gid: int) -> None:
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chown(path, uid, gid)
    path.chmod(0o700)


def seed_workspace(
    workspace: Path, files: Mapping[str, str | bytes], uid: int, gid: int
) -> list[str]:
    """Write every fixture 0600 owned by the sandbox user; validate all before writing any."""
    targets = {name: fixture_target(workspace, name) for name in files}
    prepare_directory(workspace, uid, gid)
    root = workspace.resolve()
    for name, target in targets.items():
        for parent in reversed(target.parents):
            if (parent == root or root in parent.parents) and not parent.exists():
                prepare_directory(parent, uid, gid)
        content = files[name]
        data = content.encode() if isinstance(content, str) else content
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.chown(target, uid, gid)
    return sorted(targets)


# The sandbox user's home, in the trial's /tmp: a user with no home of its own in the image
# (the sandbox's, or a bare uid a task names) gets this one.
SANDBOX_HOME = "/tmp/home"

# Where a task environment's image keeps its working directory's content (the directory
# itself becomes the trial's workspace's mount point when the image is built).
ENVIRONMENT_SEED = "/opt/examhall/seed"
# The working directory's path, as the image's build wrote it.
ENVIRONMENT_WORKDIR = "/opt/examhall/workdir"


def root() -> Path:
    """The trial's workspace, by its real path: a task's working directory is the mount
    point itself, and /workspace a link to it (service/environments/worker_layer.py)."""
    return Path(os.path.realpath(WORKSPACE_DIR))


def task_workdir(override: str | None) -> str:
    """Where a task's agent and verifier start: the task's own working directory (where the
    workspace is mounted) when its image has one, else the workspace."""
    if override:
        return override
    try:
        with open(ENVIRONMENT_WORKDIR) as handle:
            recorded = handle.read().strip()
    except OSError:
        recorded = ""
    return recorded if recorded.startswith("/") else "/workspace"


def copy_seed(seed: Path, workspace: Path) -> None:
    """Copy an image's working-directory content into the workspace, as the sandbox user
    (the copies are the agent's); modes are kept, owners are not."""
    if not seed.is_dir():
        return
    for source in sorted(seed.rglob("*")):
        target = workspace / source.relative_to(seed)
        if source.is_symlink():
            os.symlink(os.readlink(source), target)
        elif source.is_dir():
            target.mkdir(mode=0o700, exist_ok=True)
            target.chmod(source.stat().st_mode & 0o777 | 0o700)
        elif source.is_file():
            with source.open("rb") as reader, target.open("xb") as writer:
                while chunk := reader.read(1024 * 1024):
                    writer.write(chunk)
            target.chmod(source.stat().st_mode & 0o777 | 0o600)
