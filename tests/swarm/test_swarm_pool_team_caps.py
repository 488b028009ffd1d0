"""The Swarm warm pool within a team's cap (service/backends/pool_keeper.py, which the Docker
and Swarm pools share) on the real three-node swarm: the services it keeps started for a capped
team's trials are at most what that team may still start box-wide, its cap less the trials
it runs on every plane of the store (a real SQLite store, trials claimed by another plane),
and those beyond that are removed as the team's trials are claimed."""

from __future__ import annotations

from pathlib import Path

import pytest

from service.backends.base import LaunchSpec
from service.backends.swarm import SwarmBackend
from service.scheduler import Scheduler
from service.store.db import make_engine, migrate, session_factory
from tests.docker.test_pool import wait_until
from tests.docker.test_pool_team_caps import run_trial_of, team
from tests.store.conftest import make_scheduler
from tests.swarm.test_swarm_pool import pooled_backend, slots

pytestmark = pytest.mark.swarm


def test_the_swarm_pool_keeps_for_a_capped_team_only_what_it_may_still_start(
    backend: SwarmBackend, tmp_path: Path
) -> None:
    store = make_engine(f"sqlite:///{tmp_path / 'store.db'}")
    migrate(store)
    sessions = session_factory(store)
    pooled = pooled_backend(backend, pool_size=2, pool_idle_s=600.0)
    # The plane's scheduler (not started) gives the pool its room, box-wide and per team.
    plane = Scheduler(sessions, pooled, max_containers=8)
    peer = make_scheduler(sessions, owner="tests:1:swarm-peer")  # another plane on the store
    try:
        red = team(sessions, "red", cap=2)
        pool = pooled.pool
        assert pool is not None
        config = pooled.service_config(LaunchSpec("asking", "tests", team_id=red))
        assert pool.take(config, "asking", red) is None  # a miss: the pool learns to keep it
        # Red may start two: the pool's size and red's room bind alike.
        wait_until(lambda: len(slots(pooled)) == 2 and pool.ready() == 2, 180)
        # Red's trials run on the peer, one, then two: what waits for red goes with its room.
        run_trial_of(peer, red)
        wait_until(lambda: len(slots(pooled)) == 1, 120)
        run_trial_of(peer, red)
        wait_until(lambda: not slots(pooled), 120)
        assert pool.ready() == 0
    finally:
        peer.stop()
        plane.stop()  # closes the pool: its services are removed
        pooled.close_pool()  # (again, should the plane not have been made)
        store.dispose()
    assert not slots(pooled)
