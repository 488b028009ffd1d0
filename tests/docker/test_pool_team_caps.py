"""The warm pool within the teams' caps (service/backends/pool_keeper.py): what it holds for a
capped team's trials is at most what that team may still start box-wide, its cap less its
running trials as the queue counts them (a real SQLite store, trials claimed by another
plane), while an uncapped team's configuration fills to the pool's size; a cap lowered while
containers wait removes those beyond it, and a store that cannot be read leaves no team a
container. Each probe counts the containers the engine holds."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import pytest
from sqlalchemy import text, update
from sqlalchemy.orm import Session, sessionmaker

from sandbox.protocol import TrialResult
from service.backends.base import LaunchSpec
from service.backends.docker import LABEL_OWNER, LABEL_SCOPE, DockerBackend
from service.backends.docker.hardening import LABEL_POOL
from service.launch.trial import TrialRecord
from service.scheduler import Scheduler
from service.store.db import make_engine, migrate, session_factory
from service.store.models import Job, Team
from service.teams import create_team
from tests.docker.test_pool import pooled_backend, slots, wait_until
from tests.store.conftest import make_scheduler, submit

pytestmark = pytest.mark.docker

# Another control plane on the same store: its running trials count against the caps.
PEER = "tests:1:peer"
SMALL = 512 * 2**20  # the memory of a configuration other than the backend's default


@pytest.fixture
def sessions(tmp_path: Path) -> Iterator[sessionmaker[Session]]:
    engine = make_engine(f"sqlite:///{tmp_path / 'store.db'}")
    migrate(engine)
    yield session_factory(engine)
    engine.dispose()


@pytest.fixture
def pooled(
    backend: DockerBackend, docker_client: docker.DockerClient, sessions: sessionmaker[Session]
) -> Iterator[DockerBackend]:
    """A backend with a pool of 2 a configuration, whose caps a scheduler on `sessions` sets
    (not started: the trials here are the peer's)."""
    pooled = pooled_backend(backend, docker_client, pool_size=2, pool_idle_s=600.0)
    scheduler = Scheduler(sessions, pooled, max_containers=8)
    yield pooled
    scheduler.stop()  # closes the pool: its containers are removed
    assert not slots(docker_client, pooled)


@pytest.fixture
def peer(sessions: sessionmaker[Session]) -> Iterator[Scheduler]:
    """Another control plane on the store (it starts no sandbox): the trials it claims count
    against the teams' caps box-wide."""
    made = make_scheduler(sessions, owner=PEER)
    yield made
    made.stop()


def team(sessions: sessionmaker[Session], name: str, cap: int | None = None) -> str:
    with sessions.begin() as session:
        return create_team(session, name, max_containers=cap).id


def run_trial_of(peer: Scheduler, team_id: str) -> str:
    """One trial of `team_id` running on the peer, claimed through the real queue."""
    job = submit(peer.sessions, cases=["create-greeting"])
    with peer.sessions.begin() as session:
        session.get_one(Job, job.id).team_id = team_id
    [claimed] = peer.claim(1)
    assert claimed.job_id == job.id
    return claimed.trial_id


def ask(pooled: DockerBackend, team_id: str | None, **launch: Any) -> None:
    """A trial of `team_id` that finds no container of its configuration (so the pool learns
    to keep it for that team) starts its own, here left out."""
    assert pooled.pool is not None
    config = pooled.container_config(LaunchSpec("asking", "tests", team_id=team_id, **launch))
    assert pooled.pool.take(config, "asking", team_id) is None


def held(client: docker.DockerClient, pooled: DockerBackend) -> dict[str, int]:
    """The engine's pool containers of `pooled`'s owner and scope, counted by configuration
    (by their memory). None of them is taken here: each waits in the pool."""
    labels = [
        f"{LABEL_POOL}=1",
        f"{LABEL_OWNER}={pooled.owner}",
        f"{LABEL_SCOPE}={pooled.settings.scope}",
    ]
    # One the pool removes while listed is skipped (a full listing inspects each).
    listed = client.containers.list(all=True, filters={"label": labels}, ignore_removed=True)
    memory = [c.attrs["HostConfig"]["Memory"] for c in listed]
    return {"small": memory.count(SMALL), "default": len(memory) - memory.count(SMALL)}


def settled(client: docker.DockerClient, pooled: DockerBackend, wanted: dict[str, int]) -> None:
    """The engine holds `wanted` and, a few of the keeper's passes later, still does."""
    wait_until(lambda: held(client, pooled) == wanted, 30)
    time.sleep(2.5)
    assert held(client, pooled) == wanted


def test_a_capped_team_gets_only_what_it_may_still_start_an_uncapped_one_the_pools_size(
    pooled: DockerBackend,
    docker_client: docker.DockerClient,
    sessions: sessionmaker[Session],
    peer: Scheduler,
) -> None:
    red, blue = team(sessions, "red", cap=1), team(sessions, "blue")
    running = run_trial_of(peer, red)
    ask(pooled, red, memory_bytes=SMALL)
    ask(pooled, blue)
    # Red runs all its cap allows: the pool holds none for it; blue fills to the pool's size.
    settled(docker_client, pooled, {"small": 0, "default": 2})
    # Red's trial ends: red may start one again, and the pool holds that one for it.
    peer.record(running, TrialRecord(running, TrialResult("passed", score=1.0)))
    settled(docker_client, pooled, {"small": 1, "default": 2})


def test_a_cap_lowered_or_a_trial_claimed_removes_what_waits_beyond_the_teams_room(
    pooled: DockerBackend,
    docker_client: docker.DockerClient,
    sessions: sessionmaker[Session],
    peer: Scheduler,
) -> None:
    """One configuration asked for by a capped team's trials and an uncapped team's: the
    pool keeps each team's apart, and what it holds for the capped one follows its room."""
    red, blue = team(sessions, "red", cap=3), team(sessions, "blue")
    run_trial_of(peer, red)
    ask(pooled, red)
    ask(pooled, blue)
    # Red's room (3 - 1) and the pool's size bind alike: two each.
    settled(docker_client, pooled, {"small": 0, "default": 4})
    with sessions.begin() as session:  # as an admin lowers it in the store
        session.execute(update(Team).where(Team.id == red).values(max_containers=2))
    settled(docker_client, pooled, {"small": 0, "default": 3})
    # Red's second trial runs: nothing waits for red any more, blue's two stay.
    run_trial_of(peer, red)
    settled(docker_client, pooled, {"small": 0, "default": 2})


def test_a_trial_in_a_container_of_its_own_gives_back_what_its_team_has_no_room_for(
    pooled: DockerBackend,
    docker_client: docker.DockerClient,
    sessions: sessionmaker[Session],
    peer: Scheduler,
) -> None:
    """A team's trial of a configuration nothing waits for starts its own container: with
    it, the team runs one more than the pool counted, and the pool gives back one it held
    for the team (of another configuration) before that container starts."""
    red = team(sessions, "red", cap=2)
    ask(pooled, red)
    settled(docker_client, pooled, {"small": 0, "default": 2})
    run_trial_of(peer, red)
    ask(pooled, red, memory_bytes=SMALL)
    assert held(docker_client, pooled) == {"small": 0, "default": 1}
    # Red's room (2 - 1) is held: nothing more is started for either configuration.
    settled(docker_client, pooled, {"small": 0, "default": 1})


def test_a_store_that_cannot_be_read_leaves_the_teams_no_container(
    pooled: DockerBackend, docker_client: docker.DockerClient, sessions: sessionmaker[Session]
) -> None:
    """The keeper outlives the store's error and holds nothing for a team then; an admin's
    trials (no team, no cap) keep theirs, as the box's room needs no store."""
    for team_id, launch in ((team(sessions, "blue"), {}), (None, {"memory_bytes": SMALL})):
        ask(pooled, team_id, **launch)
    settled(docker_client, pooled, {"small": 2, "default": 2})
    # A real error of the store's: the table the running trials are counted in is gone.
    with sessions.begin() as session:
        session.execute(text("DROP TABLE trials"))
    settled(docker_client, pooled, {"small": 2, "default": 0})
    assert pooled.pool is not None and pooled.pool.ready() == 2
