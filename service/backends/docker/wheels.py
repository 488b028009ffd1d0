"""Python wheels for an image, downloaded on the host: image builds need no pip and no
index inside them (the Debian-bootstrapped base has no pip, and containers may reach the
index only through a proxy they do not trust). Used for the agent images, the control
plane's image and task environments' pip requirements."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import docker

from service.backends.docker.debian_base import ImageBuildError, Progress

# What manylinux wheels an image takes: the oldest policy any current wheel is built for,
# up to the image's glibc (a wheel for a newer glibc would not load).
_OLDEST_GLIBC_MINOR = 17

_PROBE = (
    "import os, sys; print('%d.%d' % sys.version_info[:2]); "
    "print(os.confstr('CS_GNU_LIBC_VERSION') or '')"
)


def python_version(client: docker.DockerClient, image: str, python: str = "python3") -> str:
    """The `major.minor` of the image's `python`, which the wheels to install must match."""
    return _probe(client, image, python)[0]


def image_glibc(client: docker.DockerClient, image: str, python: str = "python3") -> str | None:
    """The `major.minor` of the glibc the image's `python` runs on (None: not glibc)."""
    found = _probe(client, image, python)[1].removeprefix("glibc ").strip()
    return found or None


def _probe(client: docker.DockerClient, image: str, python: str) -> list[str]:
    output = client.containers.run(
        image,
        entrypoint=[python, "-I", "-c", _PROBE],
        user="0:0",
        network_mode="none",
        remove=True,
    )
    lines = bytes(output).decode().splitlines()
    return [*lines, "", ""][:2]


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
