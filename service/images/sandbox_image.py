"""Build (or reuse) the sandbox image that every trial runs in.

The image is tagged `examhall/sandbox:<first 12 hex digits of its content hash>`, where the hash
covers docker/sandbox.Dockerfile, the requested base image name and the sandbox/ package. A tag
that exists with a matching `examhall.content-hash` label is reused without talking to the
builder, so `ensure_sandbox_image` is cheap to call before every run.

The hash covers the base image's *name*, not its contents: after pulling a newer base, pass
`force=True` to rebuild.
"""

from __future__ import annotations

import hashlib
import io
import tarfile
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import docker
import docker.errors

from service.images.debian_base import ImageBuildError, Progress, resolve_base
from service.settings import Settings, get_settings

__all__ = [
    "BASE_ENV",
    "DEFAULT_BASE",
    "SANDBOX_REPO",
    "ImageBuildError",
    "content_hash",
    "ensure_sandbox_image",
    "resolve_base",
    "sandbox_base",
]

SANDBOX_REPO = "examhall/sandbox"
DEFAULT_BASE: str = Settings.model_fields["sandbox_base"].default
BASE_ENV = "EXAMHALL_SANDBOX_BASE"
HASH_LABEL = "examhall.content-hash"
BASE_LABEL = "examhall.base"
RESOLVED_BASE_LABEL = "examhall.resolved-base"

_DOCKERFILE = Path("docker") / "sandbox.Dockerfile"
_PACKAGE = "sandbox"
# What suites import, examhall.suite (re-exports of the sandbox's authoring modules), with the
# package's __init__, which loads nothing else until asked (examhall/__init__.py): a suite
# that imports it runs in the exam hall, where the library's client is not.
SUITE_API = ("examhall/__init__.py", "examhall/suite.py")
# Build and tool caches are not part of the sandbox; including them would make the hash (and
# so the image tag) depend on whether someone ran the tests or mypy.
_SKIPPED_DIRS = frozenset({"__pycache__", ".mypy_cache", ".pytest_cache", ".ruff_cache"})
_SKIPPED_SUFFIXES = (".pyc", ".pyo")
_BUILD_TAIL_LINES = 15


def fields_digest(fields: Iterable[tuple[str, bytes]]) -> str:
    """sha256 (hex) of named fields, in order."""
    sha = hashlib.sha256()
    # Length-prefixing every field keeps distinct inputs from hashing alike by concatenation.
    for name, data in fields:
        for part in (name.encode(), data):
            sha.update(len(part).to_bytes(8, "big"))
            sha.update(part)
    return sha.hexdigest()


@dataclass(frozen=True)
class BuildContext:
    """A snapshot of everything the image is built from, read once so that the hash and the
    tar sent to Docker cannot disagree."""

    dockerfile: bytes
    files: tuple[tuple[str, bytes], ...]  # (posix path relative to the repo root, contents)
    # Paths among `files` that are executable (a task's scripts); the rest are 0644.
    executable: frozenset[str] = frozenset()

    def digest(self, base: str) -> str:
        return fields_digest(
            [("Dockerfile", self.dockerfile), ("base", base.encode()), *self.files]
        )

    def tarball(self) -> bytes:
        """The build context as an uncompressed tar, byte-identical for identical content."""
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
            for name, data in [("Dockerfile", self.dockerfile), *self.files]:
                info = tarfile.TarInfo(name)
                info.size = len(data)
                info.mode = 0o755 if name in self.executable else 0o644
                info.mtime = 0
                info.uid = info.gid = 0
                info.uname = info.gname = ""
                tar.addfile(info, io.BytesIO(data))
        return buffer.getvalue()


def repo_root() -> Path:
    """The source checkout examhall runs from (it must be an editable install)."""
    # This module's own path rather than service.__file__: an editable install made before
    # service/__init__.py existed imports `service` as a namespace package with no __file__.
    return Path(__file__).resolve().parents[2]


def sandbox_base(base: str | None = None) -> str:
    """The base image to build on: the argument, else $EXAMHALL_SANDBOX_BASE, else the default."""
    return base or get_settings().sandbox_base


def load_context(root: Path | None = None) -> BuildContext:
    root = root or repo_root()
    dockerfile = root / _DOCKERFILE
    package = root / _PACKAGE
    suite_api = [root / name for name in SUITE_API]
    needed = [(dockerfile, dockerfile.is_file()), (package, package.is_dir())]
    needed += [(path, path.is_file()) for path in suite_api]
    if missing := [path for path, there in needed if not there]:
        raise ImageBuildError(
            f"{missing[0]} is missing, so the sandbox image cannot be built. examhall builds "
            f"it from its source checkout: install it with `pip install -e .` from a complete "
            f"checkout (with docker/, sandbox/ and examhall/ beside service/)."
        )
    files = tree_files(root, package) + tuple(
        (name, (root / name).read_bytes()) for name in SUITE_API
    )
    return BuildContext(dockerfile=dockerfile.read_bytes(), files=files)


def tree_files(root: Path, top: Path) -> tuple[tuple[str, bytes], ...]:
    """The files under `top` that belong in an image, named by their path from `root`."""
    return tuple(
        (path.relative_to(root).as_posix(), path.read_bytes())
        for path in sorted(top.rglob("*"))
        if path.is_file() and _belongs_in_image(path.relative_to(top))
    )


def content_hash(base: str, *, root: Path | None = None) -> str:
    """sha256 (hex) of the Dockerfile, the base image name, every file of sandbox/ and the
    suite API's (SUITE_API)."""
    return load_context(root).digest(base)


def image_ref(digest: str) -> str:
    return f"{SANDBOX_REPO}:{digest[:12]}"


def ensure_sandbox_image(
    client: docker.DockerClient,
    *,
    base: str | None = None,
    force: bool = False,
    progress: Progress,
) -> str:
    """Return a reference to a sandbox image built from the current sources, building it only
    when no up-to-date one exists (or `force` is set, which also bypasses the layer cache)."""
    wanted = sandbox_base(base)
    context = load_context()
    digest = context.digest(wanted)
    ref = image_ref(digest)
    if not force and is_current(client, ref, digest):
        progress(f"Sandbox image {ref} is up to date.")
        return ref

    resolved = resolve_base(client, wanted, progress)
    progress(f"Building sandbox image {ref} on {resolved}...")
    started = time.monotonic()
    labels = {HASH_LABEL: digest, BASE_LABEL: wanted, RESOLVED_BASE_LABEL: resolved}
    build_image(client, context, ref, resolved, labels=labels, nocache=force, progress=progress)
    image = client.images.get(ref)
    # :latest is a convenience for people poking at the image by hand; examhall uses `ref`.
    client.api.tag(image.id, SANDBOX_REPO, "latest", force=True)
    progress(f"Built {ref} ({image.short_id}) in {time.monotonic() - started:.1f} s.")
    return ref


def _belongs_in_image(relative: Path) -> bool:
    return not _SKIPPED_DIRS.intersection(relative.parts[:-1]) and not relative.name.endswith(
        _SKIPPED_SUFFIXES
    )


def is_current(client: docker.DockerClient, ref: str, digest: str) -> bool:
    try:
        image = client.images.get(ref)
    except docker.errors.ImageNotFound:
        return False
    return bool(image.labels.get(HASH_LABEL) == digest)


def build_image(
    client: docker.DockerClient,
    context: BuildContext,
    ref: str,
    resolved_base: str,
    *,
    labels: dict[str, str],
    nocache: bool,
    progress: Progress,
    advice: str = "",
) -> None:
    """Build `ref` from `context` with BASE=`resolved_base`; a failure says what to do with
    `advice` (by default, the sandbox recipe's)."""
    try:
        stream_build(
            client,
            context.tarball(),
            ref=ref,
            buildargs={"BASE": resolved_base},
            labels=labels,
            nocache=nocache,
            progress=progress,
        )
    except BuildFailed as exc:
        raise _build_failed(ref, resolved_base, exc.message, exc.tail, advice) from exc


class BuildFailed(Exception):
    def __init__(self, message: str, tail: deque[str]) -> None:
        super().__init__(message)
        self.message = message
        self.tail = tail


def stream_build(
    client: docker.DockerClient,
    tarball: bytes,
    *,
    ref: str,
    buildargs: dict[str, str],
    labels: dict[str, str],
    nocache: bool,
    progress: Progress,
) -> None:
    """Build `ref` from a context tarball, showing each line of output as progress."""
    tail: deque[str] = deque(maxlen=_BUILD_TAIL_LINES)
    try:
        for chunk in client.api.build(
            fileobj=io.BytesIO(tarball),
            custom_context=True,
            buildargs=buildargs,
            labels=labels,
            tag=ref,
            rm=True,
            forcerm=True,
            nocache=nocache,
            decode=True,
            pull=False,
        ):
            for line in str(chunk.get("stream", "")).splitlines():
                if line.strip():
                    tail.append(line.strip())
                    progress(line.strip())
            if "error" in chunk or "errorDetail" in chunk:
                detail = chunk.get("errorDetail") or {}
                message = chunk.get("error") or detail.get("message") or str(chunk)
                raise BuildFailed(str(message).strip(), tail)
    except docker.errors.DockerException as exc:
        raise BuildFailed(str(exc), tail) from exc


def _build_failed(
    ref: str, base: str, message: str, tail: deque[str], advice: str
) -> ImageBuildError:
    output = "\n".join(f"    {line}" for line in tail) or "    (no output)"
    advice = advice or (
        f"Fix the cause above (the recipe is {_DOCKERFILE}; the base must have python3 >= "
        f"3.11), or choose another base with {BASE_ENV}, then run this again."
    )
    return ImageBuildError(
        f"Building {ref} on {base} failed: {message}\nLast build output:\n{output}\n{advice}"
    )
