"""Which local image a FROM reference means on this box, which never pulls and builds only on
the images its operator allows.

EXAMHALL_IMAGE_MAP maps references to local images, as comma-separated FROM=LOCAL pairs:

    EXAMHALL_IMAGE_MAP=debian:bookworm-slim=examhall/debian-base:bookworm,python:3.12-slim=my/py

A reference is then, in order: what the map says (which must be present), itself when it is
one of the allowed images (the map's targets, the sandbox image and its configured base, the
bootstrapped Debian base), or, for `debian:<suite>` and `debian:<suite>-slim` of the
bootstrapped suite, the box's bootstrapped Debian base. Anything else is refused, naming the
image and the setting: whatever else the engine holds (other teams' environments and agent
layers, the control plane's image, anything loaded by hand) is out of a build's reach, by
name, by id or by any other spelling, since the builder hands the engine the resolved id
alone (dockerfile.py). References match as Docker reads them: `debian` is `debian:latest`,
`docker.io/library/x` is `x`, and a pinned `x:tag@sha256:...` also matches a pair for `x:tag`.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass

from service.environments.errors import EnvironmentProblem
from service.images.debian_base import DEBIAN_BASE_REPO, debian_suite
from service.images.engine import ImageEngine
from service.settings import ConfigError, env_name

MAP_ENV = env_name("image_map")
_REFERENCE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/:@-]*$")
_DEFAULT_REGISTRY = ("docker.io/library/", "index.docker.io/library/", "docker.io/", "library/")


def parse_image_map(value: str | None) -> dict[str, str]:
    """The setting's pairs, keyed by the normalised reference; a ConfigError if malformed."""
    pairs: dict[str, str] = {}
    for item in (value or "").replace("\n", ",").split(","):
        item = item.strip()
        if not item:
            continue
        source, sep, target = (part.strip() for part in item.partition("="))
        if not sep or not _REFERENCE.match(source) or not _REFERENCE.match(target):
            raise ConfigError(
                f"{MAP_ENV}: {item!r} is not FROM=LOCAL; set it to comma-separated pairs "
                f"such as debian:bookworm-slim=examhall/debian-base:bookworm, or unset it."
            )
        pairs[normalise(source)] = target
    return pairs


def normalise(reference: str) -> str:
    """A reference as Docker reads it: no default registry, and a tag (`latest` if none)."""
    for prefix in _DEFAULT_REGISTRY:
        if reference.startswith(prefix):
            reference = reference[len(prefix) :]
            break
    name, at, digest = reference.partition("@")
    last = name.rsplit("/", 1)[-1]
    if ":" not in last:
        name += ":latest"
    return name + at + digest


@dataclass(frozen=True)
class Resolved:
    reference: str  # as the Dockerfile names it
    image: str  # the local image it is built on
    image_id: str
    note: str | None  # how it was found, when not as named (for the build's progress)


class NeedsBootstrap(EnvironmentProblem):
    """The bootstrapped Debian base would serve, but this box has not bootstrapped it yet."""

    def __init__(self, reference: str, suite: str) -> None:
        super().__init__(
            f"{reference} falls back to {DEBIAN_BASE_REPO}:{suite}, which is not built yet"
        )
        self.suite = suite


def resolve_image(
    engine: ImageEngine,
    reference: str,
    image_map: dict[str, str],
    allowed: Collection[str],
) -> Resolved:
    """The local image `reference` means here, which must be the map's or in `allowed`; never
    pulls."""
    key = normalise(reference)
    mapped = image_map.get(key) or image_map.get(key.partition("@")[0])
    if mapped is not None:
        image_id = _image_id(engine, mapped)
        if image_id is None:
            raise EnvironmentProblem(
                f"{MAP_ENV} maps {reference} to {mapped}, which is not present on this box; "
                f"load or build {mapped} (`docker load`), or correct the setting"
            )
        return Resolved(reference, mapped, image_id, f"{reference} is mapped to {mapped}")
    if key in {normalise(image) for image in (*allowed, *image_map.values())}:
        image_id = _image_id(engine, reference)
        if image_id is not None:
            return Resolved(reference, reference, image_id, None)
    suite = _debian_suite_of(key)
    if suite is not None and suite == debian_suite():
        base = f"{DEBIAN_BASE_REPO}:{suite}"
        image_id = _image_id(engine, base)
        if image_id is None:
            raise NeedsBootstrap(reference, suite)
        note = f"{reference} is not present and not mapped; using the bootstrapped {base}"
        return Resolved(reference, base, image_id, note)
    raise EnvironmentProblem(
        f"the image {reference[:200]} is not present on this box or not one its builds may use "
        f"(examhall never pulls, and builds only on the images the operator allows); load it "
        f"(`docker load`) and map it with {MAP_ENV}={reference[:200]}=LOCAL_IMAGE"
    )


def _debian_suite_of(key: str) -> str | None:
    name, _, tag = key.partition("@")[0].partition(":")
    if name != "debian":
        return None
    return tag.removesuffix("-slim") or None


def _image_id(engine: ImageEngine, reference: str) -> str | None:
    image = engine.image(reference)
    return None if image is None else image.id
