"""The box's built environments and agent layers, kept under EXAMHALL_IMAGE_CACHE_GB.

Every team's build adds an image to the engine, so the disk they share is bounded here: the
images of the environment repositories are measured by the layers they own (a layer shared
by several environments, or with the base they were built on, is counted once, and the base
images not at all), and while the total is over the limit the least recently used image is
removed. Never one a queued or running trial names, one a job being prepared on this plane
found, or one made or used within the grace period (a job on another plane may have found it
and not planned its trials yet).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

from service.images.engine import EngineError, ImageEngine, ImageFacts

log = logging.getLogger("examhall.image-cache")

GRACE_S = 600.0


@dataclass(frozen=True)
class CacheState:
    images: int
    bytes: int
    limit_bytes: int | None
    removed: int  # images removed by this plane since it started


@dataclass(frozen=True)
class _Cached:
    ref: str
    created: float  # epoch seconds
    layers: dict[str, int]  # history entry -> its size, without the base's


class ImageCache:
    def __init__(
        self,
        engine: ImageEngine,
        repositories: Collection[str],
        *,
        limit_bytes: int | None,
        grace_s: float = GRACE_S,
    ) -> None:
        self.engine = engine
        self.repositories = tuple(repositories)
        self.limit_bytes = limit_bytes
        self.grace_s = grace_s
        self._lock = threading.Lock()
        self._removed = 0
        self._state = CacheState(0, 0, limit_bytes, 0)

    @property
    def state(self) -> CacheState:
        """As last measured (measuring asks the engine for every image's history)."""
        return self._state

    def collect(self, last_used: Mapping[str, datetime], keep: Collection[str]) -> list[str]:
        """Measure, and remove least recently used images while over the limit; the refs
        removed. `last_used` maps a ref to its last trial or build; `keep` are refs needed."""
        with self._lock:
            cached = self._measure()
            total = _size(cached)
            removed: list[str] = []
            now = time.time()

            def last(image: _Cached) -> float:
                used = last_used.get(image.ref)
                stamp = used.replace(tzinfo=used.tzinfo or UTC).timestamp() if used else 0.0
                return max(stamp, image.created)

            if self.limit_bytes is not None:
                for image in sorted(cached, key=last):
                    if total <= self.limit_bytes:
                        break
                    if image.ref in keep or now - last(image) < self.grace_s:
                        continue
                    try:
                        # Its untagged parents (the task image under a worker layer) go too.
                        self.engine.remove_image(image.ref)
                    except EngineError as exc:
                        log.warning("cannot remove %s from the image cache: %s", image.ref, exc)
                        continue
                    cached.remove(image)
                    total = _size(cached)
                    removed.append(image.ref)
                    log.info("removed %s from the image cache (least recently used)", image.ref)
            self._removed += len(removed)
            self._state = CacheState(len(cached), total, self.limit_bytes, self._removed)
            return removed

    def _measure(self) -> list[_Cached]:
        found: dict[str, ImageFacts] = {}
        for repository in self.repositories:
            for image in self.engine.images(repository):
                for tag in image.tags:
                    if tag.rsplit(":", 1)[0] == repository:
                        found[tag] = image
        cached: list[_Cached] = []
        for ref, image in found.items():
            history = self.engine.history(image.id)
            if history is None:
                continue  # removed meanwhile
            layers: dict[str, int] = {}
            for layer in history:
                if layer.tags and not any(
                    tag.rsplit(":", 1)[0] in self.repositories for tag in layer.tags
                ):
                    # From here down is an image of its own (the base it was built on).
                    break
                layers[layer.key] = layer.size
            cached.append(_Cached(ref, _epoch(image.created), layers))
        return cached


def _size(cached: list[_Cached]) -> int:
    layers: dict[str, int] = {}
    for image in cached:
        layers.update(image.layers)
    return sum(layers.values())


def _epoch(created: str) -> float:
    # The engine's RFC 3339 with nanoseconds; seconds are all that matter here.
    try:
        return datetime.fromisoformat(created[:19]).replace(tzinfo=UTC).timestamp()
    except ValueError:
        return 0.0
