"""What an environment is built from: a Dockerfile with its build context, or a declarative
spec; named for the messages a failed build gives."""

from __future__ import annotations

import os
import posixpath
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from service.environments.errors import EnvironmentProblem
from service.environments.spec import DeclarativeEnvironment

DOCKERFILE = "Dockerfile"
# A build context is sent to the engine whole; a task's environment/ is a few files.
MAX_CONTEXT_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class EnvironmentSource:
    # Who this environment is for, in messages: "suite harbor_demo, task jq-filter".
    name: str
    # The build context, {relative posix path: bytes}, the Dockerfile at "Dockerfile";
    # empty for a declarative source.
    files: Mapping[str, bytes] = field(default_factory=dict)
    declarative: DeclarativeEnvironment | None = None
    # The task's own build deadline; it may only lower EXAMHALL_BUILD_TIMEOUT_S.
    build_timeout_s: float | None = None
    # The agent's working directory when the task names one (task.toml's workdir); else
    # the image's WORKDIR.
    workdir: str | None = None
    # Paths among `files` that are executable, as they were on disk.
    executable: frozenset[str] = frozenset()


def dockerfile_source(
    name: str,
    files: Mapping[str, bytes],
    *,
    build_timeout_s: float | None = None,
    workdir: str | None = None,
    executable: frozenset[str] = frozenset(),
) -> EnvironmentSource:
    for path in files:
        _check_context_path(name, path)
    if DOCKERFILE not in files:
        raise EnvironmentProblem(f"{name}: the build context has no {DOCKERFILE} at its top")
    return EnvironmentSource(
        name,
        dict(sorted(files.items())),
        None,
        build_timeout_s,
        workdir,
        frozenset(executable) & frozenset(files),
    )


def declarative_source(
    name: str,
    spec: DeclarativeEnvironment,
    *,
    build_timeout_s: float | None = None,
) -> EnvironmentSource:
    return EnvironmentSource(name, {}, spec, build_timeout_s, spec.workdir)


def directory_source(
    name: str,
    directory: Path,
    *,
    build_timeout_s: float | None = None,
    workdir: str | None = None,
) -> EnvironmentSource:
    """A Dockerfile source from a directory (a Harbor task's environment/). A symlink is
    followed only when it stays inside the directory; one that points out is refused."""
    root = directory.resolve()
    files: dict[str, bytes] = {}
    executable: set[str] = set()
    total = 0
    for current, dirs, names in os.walk(root, followlinks=False):
        here = Path(current)
        for entry in [*dirs, *names]:
            path = here / entry
            relative = path.relative_to(root).as_posix()
            if path.is_symlink():
                target = path.resolve()
                if target != root and root not in target.parents:
                    raise EnvironmentProblem(
                        f"{name}: {relative} is a symlink out of the environment directory "
                        f"(to {os.readlink(path)}); a build context must be self-contained"
                    )
                if target.is_dir():
                    raise EnvironmentProblem(
                        f"{name}: {relative} is a symlink to a directory; copy the directory "
                        f"instead"
                    )
            if entry in names:
                mode = path.stat().st_mode
                if not stat.S_ISREG(mode):
                    raise EnvironmentProblem(f"{name}: {relative} is not a regular file")
                data = path.read_bytes()
                total += len(data)
                if total > MAX_CONTEXT_BYTES:
                    raise EnvironmentProblem(
                        f"{name}: the environment directory is over "
                        f"{MAX_CONTEXT_BYTES // 2**20} MiB; keep large data out of it"
                    )
                files[relative] = data
                if mode & 0o111:
                    executable.add(relative)
    return dockerfile_source(
        name,
        files,
        build_timeout_s=build_timeout_s,
        workdir=workdir,
        executable=frozenset(executable),
    )


def _check_context_path(name: str, path: str) -> None:
    if (
        not path
        or path.startswith("/")
        or "\\" in path
        or "\0" in path
        or posixpath.normpath(path) != path
        or path.split("/", 1)[0] == ".."
    ):
        raise EnvironmentProblem(
            f"{name}: {path!r} is not a relative path inside the build context"
        )
