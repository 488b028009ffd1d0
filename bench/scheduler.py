"""The control plane's own throughput (issue 30): trials through claim, launch, events,
result and the job's counts, with no sandbox in the way.

Each plane is a real Scheduler in a process of its own, on the fake backend, whose worker
sends two events and its result at once: what is measured is examhall's own work per trial
(the store's writes, the channel's parsing, the threads). Configurations: SQLite with one
plane, PostgreSQL with one plane, and two planes on one PostgreSQL. Every plane starts at
once on a go file; the time runs from then until the last plane exits, which it does when no
trial is queued or running.

    python3 bench/scheduler.py [--trials 2000] [--slots 8] [--postgres URL] [--profile]
                               [--plane-cpus 0.6]

`--postgres` (default $EXAMHALL_TEST_POSTGRES_URL) names a server where a throwaway database
is created and dropped for each configuration, as the store's tests make theirs
(tests/store/conftest.py); without one the PostgreSQL configurations are left out. `--profile`
also runs one SQLite plane in this process under cProfile and prints where its time went.

Each configuration also counts the CPU it used: the planes' (their processes' user and system
time) and, for a PostgreSQL server on this machine, the server's (every postgres process's,
with the backends that exited counted through their parent). CPU per trial bounds what any
number of planes can reach on this machine's cores, whatever the code's waits:
`ceiling = cores / CPU per trial`. Two planes and their store on this 2-core machine come
near that ceiling; `--plane-cpus` adds one and two planes each held to a share of a CPU
(bench/_cpu_share.py), as planes on boxes of their own, where their ratio measures how the
planes scale rather than the cores they share.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import os
import pstats
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from sqlalchemy import make_url

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._common import table, write_json
from bench._cpu_share import cpu_share
from sandbox.protocol import EventMessage, LifecycleEvent, ResultMessage, TrialResult
from service.app import PLANE_CONNECTIONS
from service.backends.fake import FakeBackend, FakeWorker
from service.domain.job_spec import JobRequest
from service.domain.planner import resolve_design
from service.scheduler import Scheduler
from service.store import counts
from service.store.db import make_engine, migrate, reading, session_factory
from service.store.jobs import create_job
from service.store.teams import add_team
from service.suites.python import load_suite
from tests.store.conftest import fresh_postgres_database

fresh_database = contextlib.contextmanager(fresh_postgres_database)

SMOKE = ["create-greeting", "fix-config", "count-lines", "notes-in-steps"]


def worker(w: FakeWorker) -> int:
    for seq in (1, 2):
        w.say(EventMessage(seq, LifecycleEvent("agent", f"step {seq}")))
    w.say(ResultMessage(TrialResult("passed", score=1.0)))
    return 0


def submit(url: str, trials: int, team: str | None = None) -> str:
    """One job of `trials` trials (the smoke suite's cases, as many rounds as that takes), of
    a new team named `team` (an admin's job without one)."""
    engine = make_engine(url)
    migrate(engine)
    request = JobRequest.model_validate(
        {
            "suite": "smoke",
            "model": {"provider": "simulated", "id": "coin?p=1"},
            "rounds": max(1, trials // len(SMOKE)),
        }
    )
    with session_factory(engine).begin() as session:
        team_id = None if team is None else add_team(session, team, None).id
        job = create_job(
            session,
            request,
            load_suite("smoke"),
            resolve_design(request, SMOKE),
            image="examhall/sandbox:bench",
            image_digest=None,
            team_id=team_id,
        )
        job_id = job.id
    engine.dispose()
    return job_id


def plane(url: str, owner: str, slots: int, go: Path, job_ids: list[str]) -> float:
    """Run a plane from the go file until the jobs have nothing queued or running; the
    seconds from go to then."""
    # As a plane's app opens its store (service/app.py).
    engine = make_engine(url, connections=slots + PLANE_CONNECTIONS)
    sessions = session_factory(engine)
    # The loop's own pace, as a plane runs: it wakes at every trial's end anyway.
    scheduler = Scheduler(sessions, FakeBackend(worker, owner=owner), max_containers=slots)
    while not go.exists():
        time.sleep(0.002)
    started = time.perf_counter()
    scheduler.start()
    try:
        while True:
            with reading(sessions) as session:
                kept = [counts.read(session, job_id) for job_id in job_ids]
            if all(k is not None and k.queued == 0 and k.running == 0 for k in kept):
                break
            # A tenth of a second late at most, of runs of ten seconds and more: often
            # enough to stop on time, seldom enough not to load the store it measures.
            time.sleep(0.1)
    finally:
        elapsed = time.perf_counter() - started
        scheduler.stop()
        engine.dispose()
    return elapsed


def postgres_cpu_s() -> float | None:
    """CPU seconds used so far by this machine's PostgreSQL server: each live postgres
    process's own, plus the postmaster's reaped children's (the backends of connections
    already closed); None when no server runs here or /proc is not readable."""
    total, found = 0.0, False
    tick = os.sysconf("SC_CLK_TCK")
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        name, fields = text[text.index("(") + 1 : text.rindex(")")], text.rsplit(")", 1)[1].split()
        if name != "postgres":
            continue
        found = True
        user, system, children_user, children_system = (int(v) for v in fields[11:15])
        total += (user + system + children_user + children_system) / tick
    return total if found else None


def configuration(
    url: str, planes: int, trials: int, slots: int, jobs: int = 1, cpus: float | None = None
) -> dict[str, Any]:
    """`planes` planes through `trials` trials of `jobs` jobs; with `cpus`, each plane held
    to that many CPUs (bench/_cpu_share.py), as on a box of its own."""
    # Several jobs keep a counts row each, which a trial's result locks (service/store/
    # results.py): one job's results take turns. Of teams of their own, so that the queue
    # serves them in turn rather than the older one first.
    job_ids = [submit(url, trials // jobs, None if jobs == 1 else f"team{n}") for n in range(jobs)]
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    store_before = postgres_cpu_s() if url.startswith("postgresql") else None
    with (
        tempfile.TemporaryDirectory(prefix="examhall-bench-") as scratch,
        contextlib.ExitStack() as shares,
    ):
        go = Path(scratch) / "go"
        processes = [
            subprocess.Popen(
                [
                    sys.executable,
                    __file__,
                    "--plane",
                    url,
                    f"bench:{n}:{uuid.uuid4().hex[:6]}",
                    str(slots),
                    str(go),
                    ",".join(job_ids),
                ],
                stdout=subprocess.PIPE,
                text=True,
            )
            for n in range(planes)
        ]
        if cpus is not None:
            for process in processes:
                shares.enter_context(cpu_share(process.pid, cpus))
        time.sleep(2.0)  # the planes import and connect before the clock starts
        started = time.perf_counter()
        go.touch()
        for process in processes:
            process.wait(timeout=1800)
            if process.returncode != 0:
                raise SystemExit(f"a plane failed ({process.returncode})")
        elapsed = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    store_after = postgres_cpu_s() if store_before is not None else None
    engine = make_engine(url)
    with session_factory(engine)() as session:
        kept = [counts.read(session, job_id) for job_id in job_ids]
        finished = sum(k.finished for k in kept if k is not None)
    engine.dispose()
    # The planes' import and connection before the go file count too: a few percent.
    plane_cpu = (after.ru_utime + after.ru_stime) - (children.ru_utime + children.ru_stime)
    store_cpu = None if store_after is None or store_before is None else store_after - store_before
    per_trial = (plane_cpu + (store_cpu or 0.0)) / max(finished, 1)
    return {
        "trials": finished,
        "seconds": round(elapsed, 2),
        "trials_per_min": round(finished / elapsed * 60),
        "plane_cpu_ms_per_trial": round(plane_cpu / max(finished, 1) * 1000, 2),
        "store_cpu_ms_per_trial": None
        if store_cpu is None
        else round(store_cpu / max(finished, 1) * 1000, 2),
        # What every core of this machine, kept busy by this work alone, would run.
        "ceiling_trials_per_min": round((os.cpu_count() or 1) / per_trial * 60),
    }


def profile(trials: int, slots: int) -> None:
    """One SQLite plane in this process, every thread under a profiler of its own (the
    scheduler's work is on its loop's and its trials' threads, not the main one)."""
    profilers: list[cProfile.Profile] = []

    def start_profiler(*_: Any) -> None:
        # threading.setprofile's hook runs at a new thread's first call: swap in cProfile.
        sys.setprofile(None)
        profiler = cProfile.Profile()
        profilers.append(profiler)
        profiler.enable()

    with tempfile.TemporaryDirectory(prefix="examhall-bench-") as scratch:
        url = f"sqlite:///{scratch}/profile.db"
        job_id = submit(url, trials)
        go = Path(scratch) / "go"
        go.touch()
        threading.setprofile(start_profiler)
        try:
            elapsed = plane(url, "bench:profile:0", slots, go, [job_id])
        finally:
            threading.setprofile(None)  # type: ignore[arg-type]
    print(f"\nprofile: one SQLite plane in this process, {trials} trials in {elapsed:.1f} s;")
    print("the calls of the scheduler's threads, by time spent in each function itself")
    stats = pstats.Stats(*profilers)  # type: ignore[arg-type]
    stats.sort_stats("tottime").print_stats(30)


# (planes, jobs, each plane held to a CPU share): the last two only with --plane-cpus.
_POSTGRES_CONFIGURATIONS = ((1, 1, False), (2, 1, False), (1, 2, False), (2, 2, False))
_POSTGRES_CONFIGURATIONS += ((1, 1, True), (2, 1, True))


def _name(planes: int, jobs: int, cpus: float | None) -> str:
    name = f"postgresql, {planes} plane{'s' if planes > 1 else ''}"
    name += "" if jobs == 1 else f", {jobs} jobs"
    return name if cpus is None else name + f" of {cpus:g} CPU"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trials", type=int, default=2000)
    parser.add_argument("--slots", type=int, default=8, help="containers per plane")
    parser.add_argument("--postgres", default=os.environ.get("EXAMHALL_TEST_POSTGRES_URL"))
    parser.add_argument("--profile", action="store_true")
    parser.add_argument(
        "--repeats",
        type=int,
        default=1,
        help="rounds of every configuration in turn; medians, and each round's two-plane ratio",
    )
    parser.add_argument(
        "--plane-cpus",
        type=float,
        help="also run one and two PostgreSQL planes each held to this many CPUs (a cgroup "
        "quota; needs root), as planes on boxes of their own",
    )
    parser.add_argument("--json", help="where to write the results")
    parser.add_argument("--plane", nargs=5, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.plane:
        url, owner, slots, go, job_id = args.plane
        print(plane(url, owner, int(slots), Path(go), job_id.split(",")))
        return 0

    # Every configuration once a round, in turn, so that a machine's load (this one is
    # shared) falls on all of them alike; the ratios are taken within a round.
    rounds: list[dict[str, dict[str, Any]]] = []
    for _ in range(args.repeats):
        measured: dict[str, dict[str, Any]] = {}
        with tempfile.TemporaryDirectory(prefix="examhall-bench-") as scratch:
            measured["sqlite, 1 plane"] = configuration(
                f"sqlite:///{scratch}/bench.db", 1, args.trials, args.slots
            )
        if args.postgres:
            for planes, jobs, held in _POSTGRES_CONFIGURATIONS:
                if held and args.plane_cpus is None:
                    continue
                cpus = args.plane_cpus if held else None
                with fresh_database(make_url(args.postgres)) as url:
                    measured[_name(planes, jobs, cpus)] = configuration(
                        url, planes, args.trials, args.slots, jobs, cpus
                    )
        rounds.append(measured)
    results = {
        name: {
            key: statistics.median(r[name][key] for r in rounds)
            if rounds[0][name][key] is not None
            else None
            for key in rounds[0][name]
        }
        for name in rounds[0]
    }
    rows = [
        [
            name,
            r["trials"],
            r["seconds"],
            r["trials_per_min"],
            r["plane_cpu_ms_per_trial"],
            r["store_cpu_ms_per_trial"],
            r["ceiling_trials_per_min"],
        ]
        for name, r in results.items()
    ]
    headers = ["configuration", "trials", "seconds", "trials/min"]
    headers += ["plane CPU ms/trial", "store CPU ms/trial", "CPU ceiling trials/min"]
    print(table(headers, rows))
    ratios: dict[str, list[float]] = {}
    compared: list[tuple[int, float | None]] = [(1, None), (2, None)]
    if args.plane_cpus is not None:
        compared.append((1, args.plane_cpus))
    for jobs, cpus in compared:
        one, two = _name(1, jobs, cpus), _name(2, jobs, cpus)
        if one not in results:
            continue
        label = f"{jobs} job{'s' if jobs > 1 else ''}"
        label += "" if cpus is None else f", each plane held to {cpus:g} CPU"
        each = [r[two]["trials_per_min"] / r[one]["trials_per_min"] for r in rounds]
        ratios[label] = [round(x, 2) for x in each]
        print(
            f"two planes / one plane on PostgreSQL, {label}: median "
            f"{statistics.median(each):.2f}x (rounds: {', '.join(f'{x:.2f}' for x in each)})"
        )
        if cpus is None:
            bound = results[one]["ceiling_trials_per_min"] / results[one]["trials_per_min"]
            print(f"  the most any number of planes could reach here, by CPU: {bound:.2f}x")
    print(f"load average: {os.getloadavg()}")
    write_json(
        "scheduler",
        {
            "trials": args.trials,
            "slots": args.slots,
            "repeats": args.repeats,
            "plane_cpus": args.plane_cpus,
            "results": results,
            "two_planes_over_one": ratios,
            "rounds": rounds,
        },
        args.json,
    )
    if args.profile:
        profile(args.trials, args.slots)
    return 0


if __name__ == "__main__":
    sys.exit(main())
