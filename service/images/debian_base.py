"""Find a base image for the sandbox, bootstrapping a Debian one when no registry is reachable.

The sandbox package is stdlib-only, so all a base needs is python3 >= 3.11. If the configured
base is neither present locally nor pullable, `resolve_base` builds `examhall/debian-base:<suite>`
from the Debian archive with debootstrap and `docker import`s it, so examhall works on hosts
whose Docker engine has no registry access but whose apt mirror is reachable.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path

import docker
import docker.errors

from service.settings import get_settings

Progress = Callable[[str], None]

DEBIAN_BASE_REPO = "examhall/debian-base"
SUITE_ENV = "EXAMHALL_DEBIAN_SUITE"
MIRROR_ENV = "EXAMHALL_DEBIAN_MIRROR"
FALLBACK_SUITE = "bookworm"

# Only releases whose python3 is >= 3.11 (what the sandbox needs) are taken from the host's
# os-release; older hosts and non-Debian ones fall back to FALLBACK_SUITE.
_SUITES_WITH_PYTHON_3_11 = frozenset({"bookworm", "trixie", "forky", "duke", "sid"})
_SUITE_PATTERN = re.compile(r"[a-z][a-z0-9-]{1,63}")
_MIRROR_SCHEMES = ("http://", "https://", "file:/")

# Nothing in the sandbox reads these, and they are a large share of a minbase system.
_EMPTIED_DIRS = ("var/lib/apt/lists", "usr/share/doc", "usr/share/man", "usr/share/locale")
# debootstrap copies these from the host; Docker bind-mounts its own at run time anyway.
_HOST_FILES = ("etc/hostname", "etc/resolv.conf")
# Docker gives imported images an empty config; without PATH, `python3` would not resolve.
_IMPORT_CHANGES = (
    "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "ENV LANG=C.UTF-8",
    'CMD ["bash"]',
)
_LOG_TAIL_LINES = 20


class ImageBuildError(RuntimeError):
    """An image could not be built; the message says what went wrong and what to do."""


def resolve_base(client: docker.DockerClient, base: str, progress: Progress) -> str:
    """Return an image reference to build the sandbox on: `base` itself if it is present or
    pullable, otherwise a locally bootstrapped Debian base."""
    reason = pull_if_missing(client, base, progress)
    if reason is None:
        return base

    suite = debian_suite()
    tag = f"{DEBIAN_BASE_REPO}:{suite}"
    if _image_exists(client, tag):
        progress(f"Base image {base} cannot be pulled ({reason}); using the local {tag}.")
        return tag
    progress(
        f"Base image {base} cannot be pulled ({reason}); "
        f"bootstrapping a Debian {suite} base with debootstrap..."
    )
    try:
        return bootstrap_debian_base(client, suite, progress=progress)
    except ImageBuildError as exc:
        raise ImageBuildError(
            f"{exc}\nAlternatively make {base} available to Docker (`docker pull {base}`, or "
            f"`docker load` it) or set EXAMHALL_SANDBOX_BASE to an image you already have."
        ) from exc


def pull_if_missing(client: docker.DockerClient, ref: str, progress: Progress) -> str | None:
    """Make `ref` present, pulling it when it is not; None when it is there, else why not."""
    if _image_exists(client, ref):
        return None
    progress(f"Image {ref} is not present locally; pulling it...")
    try:
        client.images.pull(ref)
    except docker.errors.DockerException as exc:
        return _docker_reason(exc)
    return None


def debian_suite() -> str:
    """The Debian release to bootstrap: $EXAMHALL_DEBIAN_SUITE, else the host's own release
    when it is a Debian one with python3 >= 3.11, else bookworm."""
    configured = get_settings().debian_suite
    if configured:
        if not _SUITE_PATTERN.fullmatch(configured):
            raise ImageBuildError(
                f"{SUITE_ENV}={configured!r} is not a Debian suite name; "
                f"set it to a codename such as {FALLBACK_SUITE}, or unset it."
            )
        return configured
    codename = _os_release().get("VERSION_CODENAME", "")
    return codename if codename in _SUITES_WITH_PYTHON_3_11 else FALLBACK_SUITE


def find_mirror(suite: str, apt_dir: Path = Path("/etc/apt")) -> str | None:
    """The Debian mirror to bootstrap from: $EXAMHALL_DEBIAN_MIRROR, else the first apt source
    of this host that serves `suite`, else None (debootstrap's own default)."""
    configured = get_settings().debian_mirror
    if configured:
        return configured
    for path in sorted((apt_dir / "sources.list.d").glob("*.sources")):
        uri = _deb822_mirror(_read_text(path), suite)
        if uri:
            return uri
    one_line_files = [
        apt_dir / "sources.list",
        *sorted((apt_dir / "sources.list.d").glob("*.list")),
    ]
    for path in one_line_files:
        uri = _one_line_mirror(_read_text(path), suite)
        if uri:
            return uri
    return None


def bootstrap_debian_base(
    client: docker.DockerClient,
    suite: str,
    *,
    mirror: str | None = None,
    progress: Progress,
) -> str:
    """Build `examhall/debian-base:<suite>` (minbase + python3) with debootstrap, import it into
    Docker and return its reference. Needs root, as debootstrap chroots into the new system."""
    debootstrap = _ensure_debootstrap(progress)
    if os.geteuid() != 0:
        raise ImageBuildError(
            "Bootstrapping a Debian base needs root, because debootstrap chroots into the new "
            "system. Run this once as root (the image is kept and reused afterwards)."
        )
    mirror = mirror or find_mirror(suite)
    tag = f"{DEBIAN_BASE_REPO}:{suite}"
    started = time.monotonic()
    workdir = Path(tempfile.mkdtemp(prefix="examhall-debootstrap-")).resolve()
    try:
        rootfs = workdir / "rootfs"
        _run_debootstrap(debootstrap, suite, rootfs, mirror, progress)
        _slim_rootfs(rootfs)
        tarball = workdir / "rootfs.tar"
        _tar_rootfs(rootfs, tarball)
        progress(f"Importing {tag} into Docker...")
        _import_rootfs(client, tarball, suite)
    finally:
        _remove_workdir(workdir, progress)
    size_mb = client.images.get(tag).attrs.get("Size", 0) / 1e6
    progress(f"Imported {tag} ({size_mb:.0f} MB) in {time.monotonic() - started:.0f} s.")
    return tag


def _image_exists(client: docker.DockerClient, ref: str) -> bool:
    try:
        client.images.get(ref)
    except docker.errors.ImageNotFound:
        return False
    return True


def _docker_reason(exc: docker.errors.DockerException) -> str:
    explanation = getattr(exc, "explanation", None)
    return str(explanation or exc).strip()


def _os_release() -> dict[str, str]:
    fields: dict[str, str] = {}
    for line in _read_text(Path("/etc/os-release")).splitlines():
        key, sep, value = line.partition("=")
        if sep:
            fields[key.strip()] = value.strip().strip("\"'")
    return fields


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def _deb822_mirror(text: str, suite: str) -> str | None:
    for stanza in _deb822_stanzas(text):
        if "deb" not in stanza.get("types", "").split():
            continue
        if stanza.get("enabled", "yes").lower() == "no":
            continue
        if suite not in stanza.get("suites", "").split():
            continue
        for uri in stanza.get("uris", "").split():
            if uri.startswith(_MIRROR_SCHEMES):
                return uri
    return None


def _deb822_stanzas(text: str) -> Iterator[dict[str, str]]:
    stanza: dict[str, str] = {}
    key = ""
    for line in [*text.splitlines(), ""]:
        if line.startswith("#"):
            continue
        if not line.strip():
            if stanza:
                yield stanza
            stanza, key = {}, ""
        elif line[0] in " \t" and key:
            stanza[key] += " " + line.strip()
        else:
            name, _, value = line.partition(":")
            key = name.strip().lower()
            stanza[key] = value.strip()


def _one_line_mirror(text: str, suite: str) -> str | None:
    for line in text.splitlines():
        words = line.split("#", 1)[0].split()
        if not words or words[0] != "deb":
            continue
        words = words[1:]
        if words and words[0].startswith("["):
            # Skip the "[option=value ...]" block, which may span several words.
            while words and not words[0].endswith("]"):
                words = words[1:]
            words = words[1:]
        if len(words) >= 2 and words[1] == suite and words[0].startswith(_MIRROR_SCHEMES):
            return words[0]
    return None


def _ensure_debootstrap(progress: Progress) -> str:
    found = _which_debootstrap()
    if found:
        return found
    apt_get = shutil.which("apt-get")
    if os.geteuid() != 0 or apt_get is None:
        raise ImageBuildError(
            "debootstrap is not installed, and it is needed to bootstrap a Debian base image. "
            "Install it (on Debian or Ubuntu, as root: `apt-get install debootstrap`) and run "
            "this again."
        )
    progress("debootstrap is not installed; installing it from Debian's packages...")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for command in (
        [apt_get, "update"],
        [apt_get, "install", "-y", "--no-install-recommends", "debootstrap"],
    ):
        returncode, tail = _stream(command, progress, prefix="apt-get: ", env=env)
        if returncode != 0:
            raise ImageBuildError(
                f"`{' '.join(command[1:3])}` failed (exit {returncode}) while installing "
                f"debootstrap:\n{_indent(tail)}\nFix apt (see above) or install debootstrap "
                f"yourself, then run this again."
            )
    found = _which_debootstrap()
    if not found:
        raise ImageBuildError(
            "apt-get reported success but debootstrap is still not on PATH; "
            "check `dpkg -L debootstrap` and run this again."
        )
    return found


def _which_debootstrap() -> str | None:
    # Non-root shells often lack the sbin directories on PATH.
    search_path = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"])
    return shutil.which("debootstrap", path=search_path)


def _run_debootstrap(
    debootstrap: str, suite: str, rootfs: Path, mirror: str | None, progress: Progress
) -> None:
    command = [debootstrap, "--variant=minbase", "--include=python3", suite, str(rootfs)]
    if mirror:
        command.append(mirror)
    progress(f"Running {' '.join(command)}")
    returncode, tail = _stream(command, progress, prefix="debootstrap: ")
    if returncode == 0:
        return
    # debootstrap's log holds the real cause (e.g. a failed download); read it before cleanup.
    log = _read_text(rootfs / "debootstrap" / "debootstrap.log").splitlines()
    details = log[-_LOG_TAIL_LINES:] if log else tail
    raise ImageBuildError(
        f"debootstrap of Debian {suite} from {mirror or 'its default mirror'} failed "
        f"(exit {returncode}). Last lines of its output:\n{_indent(details)}\n"
        f"Check that the mirror is reachable (or set {MIRROR_ENV} to one that is) and that "
        f"{suite!r} is a release this debootstrap knows (ls /usr/share/debootstrap/scripts; "
        f"choose another with {SUITE_ENV})."
    )


def _slim_rootfs(rootfs: Path) -> None:
    for relative in _EMPTIED_DIRS:
        directory = rootfs / relative
        if directory.is_dir() and not directory.is_symlink():
            for child in directory.iterdir():
                _remove_path(child)
    for package in (rootfs / "var/cache/apt/archives").glob("*.deb"):
        package.unlink()
    for relative in _HOST_FILES:
        (rootfs / relative).unlink(missing_ok=True)


def _remove_path(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink()


def _tar_rootfs(rootfs: Path, tarball: Path) -> None:
    # GNU tar handles device nodes, hard links and sparse files that the tarfile module would
    # have to special-case; --one-file-system keeps a stray mount (e.g. /proc) out of the image.
    command = [
        "tar",
        "--numeric-owner",
        "--one-file-system",
        "-C",
        str(rootfs),
        "-cf",
        str(tarball),
        ".",
    ]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise ImageBuildError(
            f"Archiving the bootstrapped system failed (exit {result.returncode}): "
            f"{result.stderr.strip()}\nCheck free space in {tarball.parent.parent} "
            f"(set TMPDIR to a larger disk) and run this again."
        )


def _import_rootfs(client: docker.DockerClient, tarball: Path, suite: str) -> None:
    # From a file path the SDK streams the tar with no timeout, so ~200 MB is no problem.
    try:
        client.api.import_image_from_file(
            str(tarball),
            repository=DEBIAN_BASE_REPO,
            tag=suite,
            changes=[*_IMPORT_CHANGES, f"LABEL examhall.debian-suite={suite}"],
        )
    except docker.errors.DockerException as exc:
        raise ImageBuildError(
            f"Docker refused to import the bootstrapped Debian {suite} system: "
            f"{_docker_reason(exc)}\nCheck the Docker daemon's log and free space, then run "
            f"this again."
        ) from exc


def _stream(
    command: Sequence[str],
    progress: Progress,
    *,
    prefix: str,
    env: dict[str, str] | None = None,
) -> tuple[int, list[str]]:
    """Run `command`, passing each output line to `progress`; return its exit code and the
    last lines (for error messages)."""
    tail: deque[str] = deque(maxlen=_LOG_TAIL_LINES)
    try:
        process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
            env=env,
        )
    except OSError as exc:
        return 127, [f"cannot run {command[0]}: {exc}"]
    try:
        assert process.stdout is not None
        for raw in process.stdout:
            line = raw.rstrip()
            if line:
                tail.append(line)
                progress(prefix + line)
        return process.wait(), list(tail)
    except BaseException:
        # Interrupted: do not leave debootstrap running while the caller deletes its target.
        process.kill()
        process.wait()
        raise


def _remove_workdir(workdir: Path, progress: Progress) -> None:
    # A failed debootstrap can leave /proc or /sys mounted inside the rootfs; deleting through
    # such a mount would delete from the host, so unmount first and refuse if anything remains.
    for mountpoint in _mounts_under(workdir):
        subprocess.run(["umount", "-l", mountpoint], capture_output=True, check=False)
    remaining = _mounts_under(workdir)
    if remaining:
        progress(
            f"Warning: left {workdir} in place because {', '.join(remaining)} is still "
            f"mounted; unmount it (umount -l) and delete the directory by hand."
        )
        return
    try:
        shutil.rmtree(workdir)
    except OSError as exc:
        progress(f"Warning: could not delete {workdir} ({exc}); delete it by hand.")


def _mounts_under(directory: Path) -> list[str]:
    """Mount points at or below `directory`, deepest first so they can be unmounted in order."""
    root = str(directory)
    found = [
        mountpoint
        for mountpoint in _mount_points(_read_text(Path("/proc/mounts")).splitlines())
        if mountpoint == root or mountpoint.startswith(root + "/")
    ]
    return sorted(found, key=len, reverse=True)


def _mount_points(lines: Iterable[str]) -> Iterator[str]:
    for line in lines:
        fields = line.split()
        if len(fields) >= 2:
            # /proc/mounts escapes spaces and the like as octal, e.g. "\040".
            yield re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), fields[1])


def _indent(lines: Iterable[str]) -> str:
    return "\n".join(f"    {line}" for line in lines)
