"""The shared eval box: the images compose.yaml runs, and the env file it reads.

On a box without a registry, compose cannot build these images by itself: the control plane's
base cannot be pulled, and containers cannot install packages from the index (they do not
trust the proxy in between). `build_box` does that part on the host instead. It resolves
each base the way the sandbox build does (present, else pulled, else a Debian base
bootstrapped here, where debootstrap can run), downloads the control plane's dependencies as
wheels here, builds the image through the engine, and writes the resulting names to the env
file beside compose.yaml, so that `docker compose up` needs nothing from outside.
"""

from __future__ import annotations

import argparse
import os
import secrets
import sys
import tempfile
import tomllib
from dataclasses import dataclass
from pathlib import Path

import docker
import docker.errors

from service.images.debian_base import ImageBuildError, Progress, pull_if_missing
from service.images.sandbox_image import (
    BASE_ENV,
    BASE_LABEL,
    DEFAULT_BASE,
    HASH_LABEL,
    RESOLVED_BASE_LABEL,
    BuildContext,
    build_image,
    is_current,
    repo_root,
    resolve_base,
    tree_files,
)
from service.images.wheels import download_wheels, python_version

CONTROL_PLANE_REPO = "examhall/control-plane"
POSTGRES_REPO = "examhall/postgres"
DEFAULT_BOX_BASE = "python:3.11-slim"
DEFAULT_POSTGRES_IMAGE = "postgres:16"
DEFAULT_PROJECT = "examhall"

# Keys of the env file that compose.yaml and compose.postgres.yaml read.
IMAGE_KEY = "EXAMHALL_IMAGE"
BOX_BASE_KEY = "EXAMHALL_BOX_BASE"
POSTGRES_IMAGE_KEY = "EXAMHALL_POSTGRES_IMAGE"
ADMIN_TOKEN_KEY = "EXAMHALL_ADMIN_TOKEN"
POSTGRES_PASSWORD_KEY = "EXAMHALL_POSTGRES_PASSWORD"
PROJECT_KEY = "COMPOSE_PROJECT_NAME"

# What the control plane runs from (the CLI's client commands import the library, examhall/);
# docker/ and sandbox/ are there to build the sandbox image.
_SOURCES = ("examhall", "service", "sandbox", "evals", "docker")
_PYPROJECT = "pyproject.toml"
_DOCKERFILE = Path("docker") / "control-plane.Dockerfile"
_POSTGRES_RECIPE = Path("docker") / "postgres"
REGISTRY_REPO = "examhall/registry"
REGISTRY_IMAGE_KEY = "EXAMHALL_REGISTRY_IMAGE"
_REGISTRY_RECIPE = Path("docker") / "registry"


@dataclass(frozen=True)
class Box:
    image: str
    base: str
    sandbox_base: str
    postgres_image: str | None
    env_file: Path
    # The keys this run added to the env file (generated secrets among them).
    added: tuple[str, ...]
    registry_image: str | None = None


def default_env_file() -> Path:
    """The .env beside compose.yaml, which compose reads by itself."""
    return repo_root() / ".env"


def requirements(root: Path | None = None) -> list[str]:
    """The control plane's requirements: the project's dependencies and the PostgreSQL
    driver. docker/control-plane.Dockerfile reads the same two lists."""
    project = tomllib.loads(((root or repo_root()) / _PYPROJECT).read_text())["project"]
    extras: dict[str, list[str]] = project.get("optional-dependencies", {})
    if "postgres" not in extras:
        raise ImageBuildError(
            f"{_PYPROJECT} has no optional dependency group 'postgres', which the control "
            f'plane\'s image installs; restore it (e.g. postgres = ["psycopg[binary]>=3.1"]).'
        )
    return [*project["dependencies"], *extras["postgres"]]


def load_box_context(root: Path | None = None) -> BuildContext:
    """The control plane's build context without its wheels: the sources it runs from."""
    root = root or repo_root()
    dockerfile = root / _DOCKERFILE
    if not dockerfile.is_file():
        raise ImageBuildError(
            f"{dockerfile} is missing; run this from a complete examhall checkout "
            f"(`pip install -e .` there)."
        )
    files: tuple[tuple[str, bytes], ...] = ((_PYPROJECT, (root / _PYPROJECT).read_bytes()),)
    for name in _SOURCES:
        files += tree_files(root, root / name)
    return BuildContext(dockerfile=dockerfile.read_bytes(), files=files)


def ensure_control_plane_image(
    client: docker.DockerClient, base: str, *, force: bool = False, progress: Progress
) -> tuple[str, str]:
    """Build (or reuse) the control plane's image on `base`, or on a bootstrapped Debian base
    when `base` cannot be had; returns the image and the base it is built on."""
    resolved = resolve_base(client, base, progress)
    context = load_box_context()
    # The resolved name goes into the hash: recording it as the base afterwards (in the env
    # file) must not make the next run rebuild the same image.
    digest = context.digest(resolved)
    ref = f"{CONTROL_PLANE_REPO}:{digest[:12]}"
    if not force and is_current(client, ref, digest):
        progress(f"Control-plane image {ref} is up to date.")
        return ref, resolved
    with tempfile.TemporaryDirectory(prefix="examhall-box-") as scratch:
        wheels = Path(scratch)
        download_wheels(requirements(), python_version(client, resolved), wheels, progress)
        wheel_files = tuple(
            (f"wheels/{path.name}", path.read_bytes()) for path in sorted(wheels.iterdir())
        )
    progress(f"Building control-plane image {ref} on {resolved}...")
    labels = {HASH_LABEL: digest, BASE_LABEL: base, RESOLVED_BASE_LABEL: resolved}
    build_image(
        client,
        BuildContext(context.dockerfile, context.files + wheel_files),
        ref,
        resolved,
        labels=labels,
        nocache=force,
        progress=progress,
        advice=f"Fix the cause above (the recipe is {_DOCKERFILE}; the base must have python3 "
        f">= 3.11), or choose another base with --base, then run this again.",
    )
    return ref, resolved


def ensure_postgres_image(
    client: docker.DockerClient, wanted: str, base: str, *, progress: Progress
) -> str:
    """`wanted` when it is present or pullable, else PostgreSQL from Debian's packages built
    on `base` (a Debian-based image: the build runs apt-get)."""
    reason = pull_if_missing(client, wanted, progress)
    if reason is None:
        return wanted
    progress(f"{wanted} cannot be pulled ({reason}); using PostgreSQL from Debian's packages.")
    return _recipe_image(
        client,
        _POSTGRES_RECIPE,
        ("entrypoint.sh",),
        POSTGRES_REPO,
        base,
        progress=progress,
        advice=f"or make {wanted} available to Docker (`docker load` it, or set "
        f"{POSTGRES_IMAGE_KEY} in the env file to an image you have)",
    )


def ensure_registry_image(client: docker.DockerClient, base: str, *, progress: Progress) -> str:
    """The box's image registry on a swarm: Debian's docker-registry, built on `base`."""
    return _recipe_image(
        client, _REGISTRY_RECIPE, ("config.yml",), REGISTRY_REPO, base, progress=progress
    )


def _recipe_image(
    client: docker.DockerClient,
    recipe: Path,
    files: tuple[str, ...],
    repo: str,
    base: str,
    *,
    progress: Progress,
    advice: str = "",
) -> str:
    """An image of one of docker/'s recipes on `base`, tagged by its content hash, built
    unless an image of that hash is there."""
    folder = repo_root() / recipe
    context = BuildContext(
        dockerfile=(folder / "Dockerfile").read_bytes(),
        files=tuple((name, (folder / name).read_bytes()) for name in files),
        executable=frozenset(name for name in files if name.endswith(".sh")),
    )
    digest = context.digest(base)
    ref = f"{repo}:{digest[:12]}"
    if is_current(client, ref, digest):
        progress(f"{ref} is up to date.")
        return ref
    progress(f"Building {ref} from Debian's packages...")
    build_image(
        client,
        context,
        ref,
        base,
        labels={HASH_LABEL: digest, BASE_LABEL: base},
        nocache=False,
        progress=progress,
        advice=f"Fix the cause above (the recipe is {recipe}/; apt-get in the build needs the "
        f"Debian mirror){', ' + advice if advice else ''}, then run this again.",
    )
    return ref


def read_env_file(path: Path) -> dict[str, str]:
    """KEY=VALUE lines, as compose reads them (comments and blank lines skipped)."""
    values: dict[str, str] = {}
    if not path.is_file():
        return values
    for line in path.read_text().splitlines():
        key, sep, value = line.strip().removeprefix("export ").partition("=")
        if sep and key.strip() and not key.lstrip().startswith("#"):
            value = value.strip()
            if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
                value = value[1:-1]
            values[key.strip()] = value
    return values


def update_env_file(path: Path, values: dict[str, str]) -> None:
    """Set `values` in the env file, keeping every other line as it was."""
    lines = path.read_text().splitlines() if path.is_file() else []
    pending = dict(values)
    for i, line in enumerate(lines):
        key = line.strip().removeprefix("export ").partition("=")[0].strip()
        if "=" in line and key in pending:
            lines[i] = f"{key}={pending.pop(key)}"
    lines += [f"{key}={value}" for key, value in pending.items()]
    temporary = path.with_name(f"{path.name}.tmp")
    # The file holds the admin token and the database password: owner-only from the start.
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as handle:
        handle.write("\n".join(lines) + "\n")
    temporary.replace(path)


def _setting(key: str, given: str | None, env_file: dict[str, str], default: str) -> str:
    """The flag, else the env file: the control plane's container gets the file's values (its
    `env_file`), not this shell's."""
    return given or env_file.get(key, "").strip() or default


def build_box(
    client: docker.DockerClient,
    *,
    env_file: Path,
    base: str | None = None,
    sandbox_base: str | None = None,
    postgres: bool = False,
    swarm: bool = False,
    force: bool = False,
    progress: Progress,
) -> Box:
    """Make every image the box needs present and record them in `env_file`, with the
    secrets it lacks (`missing_defaults`)."""
    current = read_env_file(env_file)
    image, resolved_base = ensure_control_plane_image(
        client,
        _setting(BOX_BASE_KEY, base, current, DEFAULT_BOX_BASE),
        force=force,
        progress=progress,
    )
    # Resolved here because debootstrap cannot run inside the control plane's container; the
    # control plane builds the sandbox image itself on its first start.
    resolved_sandbox_base = resolve_base(
        client, _setting(BASE_ENV, sandbox_base, current, DEFAULT_BASE), progress
    )
    updates = {IMAGE_KEY: image, BOX_BASE_KEY: resolved_base, BASE_ENV: resolved_sandbox_base}
    postgres_image = None
    if postgres:
        wanted = _setting(POSTGRES_IMAGE_KEY, None, current, DEFAULT_POSTGRES_IMAGE)
        if wanted.startswith(f"{POSTGRES_REPO}:"):
            # One of ours, recorded by an earlier run: check again, in case the recipe changed.
            wanted = DEFAULT_POSTGRES_IMAGE
        postgres_image = ensure_postgres_image(client, wanted, resolved_base, progress=progress)
        updates[POSTGRES_IMAGE_KEY] = postgres_image
    if swarm:
        # The swarm's own registry, through which every node gets the trials' images.
        updates[REGISTRY_IMAGE_KEY] = ensure_registry_image(
            client, resolved_base, progress=progress
        )
    added = missing_defaults(current, postgres=postgres)
    update_env_file(env_file, {**updates, **added})
    return Box(
        image,
        resolved_base,
        resolved_sandbox_base,
        postgres_image,
        env_file,
        tuple(added),
        updates.get(REGISTRY_IMAGE_KEY),
    )


def missing_defaults(current: dict[str, str], *, postgres: bool) -> dict[str, str]:
    """The project name and generated secrets that the env file lacks; a value already there
    is never replaced (the PostgreSQL volume keeps the password it was created with)."""
    defaults = {
        PROJECT_KEY: DEFAULT_PROJECT,
        ADMIN_TOKEN_KEY: f"exh_admin_{secrets.token_urlsafe(32)}",
    }
    if postgres:
        defaults[POSTGRES_PASSWORD_KEY] = secrets.token_hex(24)
    return {key: value for key, value in defaults.items() if not current.get(key)}


def _progress(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def cmd_box_build(args: argparse.Namespace) -> int:
    env_file = Path(args.env_file) if args.env_file else default_env_file()
    try:
        client = docker.from_env()
        client.ping()
        box = build_box(
            client,
            env_file=env_file,
            base=args.base,
            sandbox_base=args.sandbox_base,
            postgres=args.postgres or args.swarm,
            swarm=args.swarm,
            force=args.force,
            progress=_progress,
        )
    except docker.errors.DockerException as exc:
        message = f"the Docker engine failed ({exc}); start it or set DOCKER_HOST, then retry."
        print(f"examhall: {message}", file=sys.stderr)
        return 1
    except ImageBuildError as exc:
        print(f"examhall: {exc}", file=sys.stderr)
        return 1
    print(f"control plane  {box.image} (on {box.base})")
    print(f"sandbox base   {box.sandbox_base}")
    if box.postgres_image:
        print(f"postgres       {box.postgres_image}")
    new = f"; added {', '.join(box.added)}" if box.added else ""
    print(f"Wrote {box.env_file}{new}.")
    if args.swarm:
        print(f"registry       {box.registry_image}")
        print(
            "Next, on this manager (docs/guides/several-boxes.md): set -a; . ./.env; set +a; "
            "docker stack deploy -c stack.yaml examhall"
        )
        return 0
    files = " -f compose.yaml -f compose.postgres.yaml" if args.postgres else ""
    print(f"Next, beside compose.yaml: docker compose{files} up -d (Compose v1: docker-compose)")
    return 0


def add_box_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    box = sub.add_parser("box", help="the shared eval box (compose.yaml)").add_subparsers(
        dest="box_command", required=True
    )
    build = box.add_parser(
        "build",
        help="build the images compose.yaml runs and write the env file it reads "
        "(skipped when up to date)",
    )
    build.add_argument(
        "--base",
        help=f"the control plane's base image (default: {BOX_BASE_KEY} in the env file, else "
        f"{DEFAULT_BOX_BASE}; a bootstrapped Debian base when it cannot be pulled)",
    )
    build.add_argument(
        "--sandbox-base",
        help=f"the sandbox's base image (default: {BASE_ENV} in the env file, else "
        f"{DEFAULT_BASE}; a bootstrapped Debian base when it cannot be pulled)",
    )
    build.add_argument(
        "--postgres",
        action="store_true",
        help=f"also make a PostgreSQL image present for compose.postgres.yaml "
        f"({POSTGRES_IMAGE_KEY}, else {DEFAULT_POSTGRES_IMAGE}, else built from Debian's packages)",
    )
    build.add_argument(
        "--swarm",
        action="store_true",
        help=f"for stack.yaml on a Docker Swarm: --postgres, and the box's image registry "
        f"({REGISTRY_IMAGE_KEY}, from Debian's docker-registry)",
    )
    build.add_argument(
        "--env-file", help="the env file to write (default: .env beside compose.yaml)"
    )
    build.add_argument("--force", action="store_true", help="rebuild even when up to date")
    build.set_defaults(func=cmd_box_build)
