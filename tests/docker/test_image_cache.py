"""The image cache on the real engine: built environments measured by the layers they own,
and the least recently used removed past the limit, never one that is needed or recent."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta

import docker
import docker.errors
import pytest

from service.environments import BuiltEnvironment, EnvironmentBuilder, dockerfile_source
from service.environments.cache import ImageCache
from service.images.docker_engine import DockerImageEngine
from service.settings import Settings

pytestmark = pytest.mark.docker

RUN = uuid.uuid4().hex[:10]
REPOSITORY = f"examhall-test-{RUN}/env"
DEBIAN = "examhall/debian-base:bookworm"
MB = 1024 * 1024


@pytest.fixture(scope="module")
def built(
    docker_client: docker.DockerClient, sandbox_image: str
) -> Iterator[list[BuiltEnvironment]]:
    builder = EnvironmentBuilder(
        DockerImageEngine(docker_client),
        sandbox_image=sandbox_image,
        settings=Settings(debian_suite="bookworm"),
        repository=REPOSITORY,
    )

    def source(n: int) -> bytes:
        return f"FROM {DEBIAN}\nRUN head -c 3m /dev/urandom > /{RUN}-{n}\n".encode()

    envs = [
        builder.build(
            dockerfile_source(f"suite cache, task {n}", {"Dockerfile": source(n)}), lambda _: None
        )
        for n in range(3)
    ]
    yield envs
    for image in docker_client.images.list(name=REPOSITORY):
        for tag in image.tags:
            docker_client.images.remove(tag, force=True)


def present(client: docker.DockerClient, ref: str) -> bool:
    try:
        client.images.get(ref)
    except docker.errors.ImageNotFound:
        return False
    return True


def test_the_least_recently_used_go_first_and_the_needed_stay(
    built: list[BuiltEnvironment], docker_client: docker.DockerClient
) -> None:
    kept, older, newer = built
    now = datetime.now()
    used = {
        kept.ref: now - timedelta(days=3),
        older.ref: now - timedelta(days=2),
        newer.ref: now - timedelta(days=1),
    }

    measured = ImageCache(
        DockerImageEngine(docker_client), [REPOSITORY], limit_bytes=None, grace_s=0
    )
    assert measured.collect(used, keep=set()) == []
    state = measured.state
    # Three images of their own 3 MB each and more; the Debian base below them is not counted.
    base = docker_client.images.get(DEBIAN).attrs["Size"]
    assert state.images == 3 and 9 * MB < state.bytes < base + 9 * MB

    # A recent image is never removed, however far over the limit.
    fresh = ImageCache(DockerImageEngine(docker_client), [REPOSITORY], limit_bytes=1, grace_s=3600)
    assert fresh.collect(used, keep=set()) == []

    cache = ImageCache(
        DockerImageEngine(docker_client), [REPOSITORY], limit_bytes=state.bytes - 1, grace_s=0
    )
    # The oldest is needed (a queued trial names it): the next oldest goes, and that is enough.
    assert cache.collect(used, keep={kept.ref}) == [older.ref]
    assert not present(docker_client, older.ref)
    assert present(docker_client, kept.ref) and present(docker_client, newer.ref)
    assert cache.state.bytes <= state.bytes - 3 * MB and cache.state.images == 2

    tight = ImageCache(DockerImageEngine(docker_client), [REPOSITORY], limit_bytes=1, grace_s=0)
    assert tight.collect(used, keep={kept.ref}) == [newer.ref]
    assert tight.state.images == 1 and tight.state.removed == 1
    assert present(docker_client, kept.ref)
