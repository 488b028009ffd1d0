"""The declarative environment: Debian packages, pinned pip requirements, files, variables and
a working directory, compiled to a Dockerfile on a base image."""

from __future__ import annotations

import json
import posixpath
import re
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from service.domain.requirements import PinnedRequirement
from service.environments.references import check_base
from service.environments.worker_layer import reaches_worker
from service.images.debian_base import DEBIAN_BASE_REPO, debian_suite
from service.settings import Settings

# Debian policy 5.6.1: lower case letters, digits, + - . ; at least two characters.
_APT_PACKAGE = re.compile(r"^[a-z0-9][a-z0-9+.-]+(=[A-Za-z0-9.+~:-]+)?$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

# Where the compiled Dockerfile's inputs sit in its build context.
WHEELS_DIR = "examhall-wheels"
FILES_DIR = "examhall-files"


def _apt_package(name: str) -> str:
    if not _APT_PACKAGE.match(name):
        raise ValueError(
            f"{name!r} is not a Debian package name (lower case letters, digits, + - and ., "
            f"optionally =VERSION)"
        )
    return name


def _relative_path(path: str) -> str:
    parts = path.split("/")
    if (
        not path
        or path.startswith("/")
        or "\\" in path
        or "\0" in path
        or any(part in ("", ".", "..") for part in parts)
    ):
        raise ValueError(
            f"file path {path!r} must be relative, with no empty, '.' or '..' part (such as "
            f"src/main.py)"
        )
    return path


def _absolute_dir(path: str) -> str:
    normal = posixpath.normpath(path)
    if not path.startswith("/") or normal != path.rstrip("/") or "\0" in path:
        raise ValueError(f"workdir {path!r} must be an absolute, normalised path such as /app")
    return normal


AptPackage = Annotated[str, AfterValidator(_apt_package)]
RelativePath = Annotated[str, AfterValidator(_relative_path)]


def _env(values: dict[str, str]) -> dict[str, str]:
    for name, value in values.items():
        if not _ENV_NAME.match(name):
            raise ValueError(f"env name {name!r} is not a variable name (letters, digits, _)")
        if reaches_worker(name):
            raise ValueError(
                f"env {name} would reach examhall's worker (its Python or its loader); "
                f"set it in the agent's command instead"
            )
        if "\n" in value or "\0" in value:
            raise ValueError(f"env {name}'s value has a line break or NUL; it must be one line")
    return values


class DeclarativeEnvironment(BaseModel):
    """A task environment without a Dockerfile. `files` are written under `workdir`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # Checked here, at the edge: it becomes the compiled Dockerfile's FROM line.
    base: Annotated[str, AfterValidator(check_base)] | None = Field(
        default=None,
        description="the image to build on, an image reference that names none of the box's "
        "own images (default: EXAMHALL_SANDBOX_BASE when set, else the box's bootstrapped "
        "examhall/debian-base:<suite>)",
    )
    apt: list[AptPackage] = Field(default_factory=list, description="Debian packages")
    pip: list[PinnedRequirement] = Field(
        default_factory=list, description="pip requirements, each pinned as NAME==VERSION"
    )
    files: dict[RelativePath, str] = Field(
        default_factory=dict, description="relative path (under workdir) -> text"
    )
    env: Annotated[dict[str, str], AfterValidator(_env)] = Field(
        default_factory=dict, description="environment variables of the image"
    )
    workdir: Annotated[str, AfterValidator(_absolute_dir)] | None = Field(
        default=None, description="the agent's working directory, seeded with `files`"
    )

    @model_validator(mode="after")
    def _files_need_a_workdir(self) -> DeclarativeEnvironment:
        if self.files and self.workdir is None:
            raise ValueError("files are written under workdir; set workdir (such as /app)")
        return self

    def canonical(self) -> bytes:
        """The spec as bytes that change exactly when the spec does (for the content hash)."""
        return json.dumps(self.model_dump(), sort_keys=True, separators=(",", ":")).encode()


def default_base(settings: Settings) -> str:
    if "sandbox_base" in settings.model_fields_set:
        return settings.sandbox_base
    return f"{DEBIAN_BASE_REPO}:{debian_suite()}"


def compile_dockerfile(spec: DeclarativeEnvironment, settings: Settings) -> str:
    """The Dockerfile of `spec`, to be built with context_files(spec) and, when it has pip
    requirements, the wheels (downloaded on the host) under WHEELS_DIR."""
    lines = [f"FROM {spec.base or default_base(settings)}"]
    if spec.apt:
        # The build's containers reach Debian's mirror; the lists are dropped to keep the
        # layer small and the image's apt state as a fresh Debian image's.
        lines.append(
            "RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y "
            f"--no-install-recommends {' '.join(spec.apt)} && rm -rf /var/lib/apt/lists/*"
        )
    if spec.pip:
        # pip runs from its own wheel, offline: the image needs neither pip nor the index.
        # --break-system-packages: a Debian python3 is "externally managed" (PEP 668), and
        # this image is the task's system, which is what the requirements are for.
        lines += [
            f"COPY {WHEELS_DIR} /tmp/{WHEELS_DIR}",
            f'RUN python3 "$(ls /tmp/{WHEELS_DIR}/pip-*.whl)/pip" install --no-index '
            f"--find-links /tmp/{WHEELS_DIR} --no-cache-dir --root-user-action=ignore "
            f"--break-system-packages --disable-pip-version-check {' '.join(spec.pip)} "
            f"&& rm -rf /tmp/{WHEELS_DIR}",
        ]
    if spec.env:
        pairs = " ".join(f"{name}={_quoted(value)}" for name, value in sorted(spec.env.items()))
        lines.append(f"ENV {pairs}")
    if spec.workdir is not None:
        lines.append(f"WORKDIR {spec.workdir}")
        if spec.files:
            lines.append(f"COPY {FILES_DIR}/ {spec.workdir}/")
    return "\n".join(lines) + "\n"


def context_files(spec: DeclarativeEnvironment) -> dict[str, bytes]:
    return {f"{FILES_DIR}/{path}": text.encode() for path, text in sorted(spec.files.items())}


def _quoted(value: str) -> str:
    # ENV expands $variables and treats \ and " specially inside double quotes.
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("$", "\\$")
    return f'"{escaped}"'
