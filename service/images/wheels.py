"""Python wheels for an image, downloaded on the host: image builds need no pip and no
index inside them (the Debian-bootstrapped base has no pip, and containers may reach the
index only through a proxy they do not trust). Used for the agent images, the control
plane's image and task environments' pip requirements."""

from __future__ import annotations

import re
import subprocess
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import docker
import docker.errors

from service.images.capped import CappedRunError, Caps, run_capped
from service.images.debian_base import ImageBuildError, Progress

# What manylinux wheels an image takes: the oldest policy any current wheel is built for,
# up to the image's glibc (a wheel for a newer glibc would not load).
_OLDEST_GLIBC_MINOR = 17

_PROBE = (
    "import os, sys; print('%d.%d' % sys.version_info[:2]); "
    "print(os.confstr('CS_GNU_LIBC_VERSION') or '')"
)


# For the box's own images (the sandbox's base); a team's image is probed under its build's.
OWN_IMAGE_CAPS = Caps(memory=512 * 1024 * 1024, pids=64, cpu_shares=1024, timeout_s=60)


@dataclass(frozen=True)
class ImagePython:
    version: str  # `major.minor`, which the wheels to install must match
    glibc: str | None  # `major.minor` of the glibc it runs on (None: not glibc)


def image_python(
    client: docker.DockerClient,
    image: str,
    python: str = "python3",
    caps: Caps = OWN_IMAGE_CAPS,
    cancel: threading.Event | None = None,
) -> ImagePython:
    """What the image's `python` is, from one capped run of it (capped.py); ImageBuildError
    if it does not run."""
    try:
        ran = run_capped(client, image, [python, "-I", "-c", _PROBE], caps, cancel=cancel)
    except CappedRunError as exc:
        raise ImageBuildError(f"running {python} in the image failed: {exc}") from exc
    except docker.errors.APIError as exc:
        raise ImageBuildError(f"{python} does not run in the image ({exc.explanation})") from exc
    lines = [*ran.output.splitlines(), "", ""]
    if ran.status != 0 or not re.fullmatch(r"\d+\.\d+", lines[0]):
        raise ImageBuildError(
            f"{python} in the image exits {ran.status}: {ran.output[-300:].strip()}"
        )
    glibc = lines[1].removeprefix("glibc ").strip()
    return ImagePython(lines[0], glibc or None)


def python_version(client: docker.DockerClient, image: str, python: str = "python3") -> str:
    """The `major.minor` of one of the box's own images' `python`."""
    return image_python(client, image, python).version


def image_glibc(client: docker.DockerClient, image: str, python: str = "python3") -> str | None:
    """The glibc one of the box's own images' `python` runs on."""
    return image_python(client, image, python).glibc


def manylinux_platforms(glibc: str | None, machine: str = "x86_64") -> list[str]:
    """pip's --platform values for an image with `glibc` (default: manylinux2014's 2.17)."""
    major, _, minor = (glibc or f"2.{_OLDEST_GLIBC_MINOR}").partition(".")
    top = int(minor) if major == "2" and minor.isdigit() else _OLDEST_GLIBC_MINOR
    # pip expands manylinux2014 to 2010 and 1, but not manylinux_2_X to the older ones.
    return [
        *(f"manylinux_2_{n}_{machine}" for n in range(top, _OLDEST_GLIBC_MINOR, -1)),
        f"manylinux2014_{machine}",
    ]


def download_wheels(
    requirements: Sequence[str],
    python: str,
    into: Path,
    progress: Progress,
    *,
    glibc: str | None = None,
) -> None:
    """Wheels of `requirements` and of pip itself, for Python `python` on x86_64 Linux (with
    `glibc`, default manylinux2014's), into `into`; an image then installs them with pip run
    from its own wheel, offline."""
    wanted = ", ".join(requirements)
    progress(f"Downloading {wanted} and pip as wheels for Python {python}...")
    platforms = [arg for platform in manylinux_platforms(glibc) for arg in ("--platform", platform)]
    done = subprocess.run(
        [
            sys.executable, "-m", "pip", "download", "--quiet", "--only-binary=:all:",
            "--python-version", python, *platforms,
            "--dest", str(into), *requirements, "pip",
        ],
        capture_output=True,
        text=True,
        check=False,
    )  # fmt: skip
    if done.returncode != 0:
        raise ImageBuildError(
            f"Could not download {wanted} from the package index: "
            f"{done.stderr.strip()[-800:]}\nCheck that pip reaches the index, then retry."
        )
