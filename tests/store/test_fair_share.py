"""Teams take turns at the queue by their shares, and a team's jobs go by priority then age:
the real claim of two control planes on one database (SQLite and PostgreSQL), with trials
finishing one at a time as a box's slots free."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterator

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from sandbox.protocol import TrialResult
from service.launch.trial import TrialRecord
from service.store.models import Job, Trial
from service.teams import create_team
from tests.store.conftest import SMOKE, make_scheduler, submit

PASSED = TrialResult("passed", score=1.0)


class Box:
    """Two planes of `slots` each on one store. Time moves by trials ending: the oldest
    running trial of a plane ends, and that plane claims into the slot it freed."""

    def __init__(self, sessions: sessionmaker[Session], slots: int) -> None:
        self.sessions = sessions
        self.slots = slots
        self.planes = [make_scheduler(sessions, owner=f"tests:{n}:fair") for n in (1, 2)]
        self.running: dict[int, list[tuple[str, str]]] = {0: [], 1: []}
        self.teams: dict[str, str] = {}  # job id -> team name
        self.claims: list[str] = []  # the team of every claim, in order

    def job(self, team: tuple[str, str], rounds: int, **body: object) -> str:
        job = submit(self.sessions, rounds=rounds, **body)
        with self.sessions.begin() as session:
            session.get_one(Job, job.id).team_id = team[0]
        self.teams[job.id] = team[1]
        return job.id

    def fill(self, plane: int) -> list[str]:
        free = self.slots - len(self.running[plane])
        claimed = self.planes[plane].claim(free) if free > 0 else []
        self.running[plane] += claimed
        teams = [self.teams[job_id] for _, job_id in claimed]
        self.claims += teams
        return teams

    def end_one(self, plane: int) -> list[str]:
        """The plane's oldest trial ends; what the plane then claims."""
        trial_id, _ = self.running[plane].pop(0)
        self.planes[plane].record(trial_id, TrialRecord(trial_id, PASSED))
        return self.fill(plane)

    def running_by_team(self) -> Counter[str]:
        return Counter(self.teams[job] for plane in self.running.values() for _, job in plane)

    def stop(self) -> None:
        for plane in self.planes:
            plane.stop()


@pytest.fixture
def box(sessions: sessionmaker[Session]) -> Iterator[Box]:
    made = Box(sessions, slots=2)
    yield made
    made.stop()


def _team(sessions: sessionmaker[Session], name: str, share: int | None = None) -> tuple[str, str]:
    with sessions.begin() as session:
        return create_team(session, name, share=share).id, name


def test_a_small_job_of_another_team_starts_at_the_first_slot_that_frees(
    sessions: sessionmaker[Session], box: Box
) -> None:
    big, small = _team(sessions, "big"), _team(sessions, "small")
    box.job(big, rounds=500)  # 2,000 trials, submitted first
    assert box.fill(0) + box.fill(1) == ["big"] * 4
    box.job(small, rounds=5)  # 20 trials

    # The first slot to free goes to the other team, not to the older, longer queue ...
    assert box.end_one(0) == ["small"]
    # ... and the turns keep both at an equal share of the box (2 of 4 slots) while both
    # have trials queued, whichever plane's slot frees.
    for step in range(60):
        box.end_one(step % 2)
        held = box.running_by_team()
        if box.claims.count("small") < 20:
            assert held["small"] == 2 or (step == 0 and held["small"] == 1), (step, held)
    assert box.claims.count("small") == 20
    # All 20 ran (the last ended within the last steps); the slots went back to big.
    assert box.running_by_team() == Counter({"big": 4})


def test_shares_weigh_the_turns(sessions: sessionmaker[Session]) -> None:
    box = Box(sessions, slots=4)
    try:
        heavy, light = _team(sessions, "heavy", share=3), _team(sessions, "light")
        box.job(light, rounds=100)
        box.job(heavy, rounds=100)
        box.fill(0)
        box.fill(1)
        for step in range(60):
            box.end_one(step % 2)
            # 8 slots, shares 3 to 1: 6 and 2, whichever was queued first.
            assert box.running_by_team() == Counter({"heavy": 6, "light": 2}), step
    finally:
        box.stop()


def test_within_a_team_a_higher_priority_goes_first_then_the_older(
    sessions: sessionmaker[Session], box: Box
) -> None:
    team = _team(sessions, "one")
    older = box.job(team, rounds=1)
    urgent = box.job(team, rounds=1, priority=5)
    newer = box.job(team, rounds=1)
    claimed = box.planes[0].claim(12)
    by_job = [job_id for _, job_id in claimed]
    assert by_job == [urgent] * len(SMOKE) + [older] * len(SMOKE) + [newer] * len(SMOKE)


def test_no_team_starves_under_a_random_mix(sessions: sessionmaker[Session]) -> None:
    rng = random.Random(1)
    box = Box(sessions, slots=3)
    try:
        teams = [_team(sessions, f"team-{n}", share=rng.randint(1, 4)) for n in range(5)]
        for _ in range(12):
            box.job(rng.choice(teams), rounds=rng.randint(1, 6), priority=rng.randint(-2, 2))
        box.fill(0)
        box.fill(1)
        # Slots freed while a team had trials queued and none running: a team at no load is
        # the first the turns serve (ties by age), so it waits behind at most the other
        # teams at no load, never behind a whole other queue.
        starved: Counter[str] = Counter()
        while any(box.running.values()):
            plane = rng.randrange(2) if all(box.running.values()) else int(not box.running[0])
            box.end_one(plane)
            waiting = {box.teams[j] for j in _queued_jobs(box)}
            held = box.running_by_team()
            for name in {name for _, name in teams}:
                starved[name] = starved[name] + 1 if name in waiting and not held[name] else 0
                assert starved[name] < len(teams), (name, starved, held)
            if len(box.claims) < 100 and rng.random() < 0.1:  # now and then a new job
                box.job(rng.choice(teams), rounds=rng.randint(1, 3), priority=rng.randint(-2, 2))
        assert set(box.claims) == {name for _, name in teams} & set(box.teams.values())
    finally:
        box.stop()


def _queued_jobs(box: Box) -> set[str]:
    with box.sessions() as session:
        return set(session.scalars(select(Trial.job_id).where(Trial.status == "queued")).all())
