"""`examhall check-tasks` on the shipped task set (evals/harbor_demo), cold and cached, and
beside it Harbor's oracle and nop runs of the same tasks where Harbor can run them here.

    PYTHONPATH=. python3 bench/check_tasks.py [--harbor] [--concurrency N]

The set is copied, and every Dockerfile of the copy gets a label of this run after its FROM,
so the first check builds every environment from its base (the engine's layer cache and
the examhall/env tags of other runs serve nothing) and the second finds them all cached. The
online task (pytest-from-pypi, whose verifier pip-installs pytest) is pointed at a package
index on loopback (tests/package_index.py, serving the wheels python-project vendors) and
the checks run under an egress policy that allows just that index, so nothing leaves the
machine. Each check is the CLI as a user runs it: `examhall check-tasks COPY --local
--egress local --json`, timed from start to exit. Afterwards the examhall/env images the
run built are removed by their tags (from the run's own database).

Harbor (0.26, in the container bench/_harbor.py builds) runs its `oracle` and `nop` agents
on the same copy: each task's image is built first (`docker build` on the bootstrapped
Debian base, the same Dockerfile), timed apart, and named in task.toml (docker_image), and
its trials get no network (bench/harbor/no-network.yaml). The online task is left out
there: without a network Harbor has no way to its index.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from _common import REPO, machine, table, write_json

sys.path.insert(0, str(REPO))
from tests.package_index import PackageIndex, point_at_index

DEMO = REPO / "evals" / "harbor_demo"
ONLINE = "pytest-from-pypi"
BUILT = re.compile(r"^(built|cached) \d+/\d+: (\S+)")
HARBOR_REPO = "examhall-bench/harbor-demo"


def copy_set(root: Path, nonce: str, index_url: str) -> Path:
    suite = root / "harbor_demo"
    shutil.copytree(DEMO, suite)
    for dockerfile in suite.glob("*/environment/Dockerfile"):
        lines = dockerfile.read_text().splitlines()
        at = next(i for i, line in enumerate(lines) if line.startswith("FROM "))
        lines.insert(at + 1, f"LABEL examhall.bench={nonce}")
        dockerfile.write_text("\n".join(lines) + "\n")
    point_at_index(suite / ONLINE, index_url)
    return suite


def check(suite: Path, database: Path, env: dict[str, str]) -> dict[str, Any]:
    """One `examhall check-tasks --local` run: its wall time, verdicts and builds."""
    command = [
        sys.executable, "-m", "service.cli", "check-tasks", str(suite), "--local",
        "--egress", "local", "--json",
    ]  # fmt: skip
    started = time.perf_counter()
    done = subprocess.run(
        command,
        env={**env, "EXAMHALL_DATABASE_URL": f"sqlite:///{database}"},
        capture_output=True,
        text=True,
        check=False,
        cwd=REPO,
    )
    seconds = time.perf_counter() - started
    if done.returncode not in (0, 1):
        raise RuntimeError(f"check-tasks exited {done.returncode}:\n{done.stderr[-3000:]}")
    rows = json.loads(done.stdout)
    builds: dict[str, str] = {}
    for line in done.stderr.splitlines():
        if matched := BUILT.match(line):
            # The first line a task gets says it: with builds side by side
            # (EXAMHALL_BUILD_CONCURRENCY > 1) a task just built is listed as cached after.
            builds.setdefault(matched.group(2), matched.group(1))
    return {
        "seconds": round(seconds, 1),
        "exit": done.returncode,
        "rows": [{"task": r["task"], "oracle": r["oracle"], "nop": r["nop"]} for r in rows],
        "verdicts": {row["task"]: row["verdict"] for row in rows},
        "causes": {row["task"]: row["cause"] for row in rows if row["verdict"] != "sound"},
        "built": sorted(task for task, how in builds.items() if how == "built"),
        "cached": sorted(task for task, how in builds.items() if how == "cached"),
        "build_lines": [line for line in done.stderr.splitlines() if BUILT.match(line)],
    }


def env_images(database: Path) -> list[str]:
    with sqlite3.connect(database) as db:
        rows = db.execute("SELECT DISTINCT image FROM trials WHERE image IS NOT NULL")
        return sorted(row[0] for row in rows if row[0].startswith("examhall/env:"))


def harbor_side(suite: Path, root: Path, nonce: str, concurrency: int) -> dict[str, Any]:
    """Harbor's oracle and nop on the copy (the online task left out), on images built here."""
    import _harbor

    runner = _harbor.runner_image()
    tasks = root / "harbor_tasks"
    tasks.mkdir()
    built: dict[str, float] = {}
    for task in sorted(p for p in suite.iterdir() if (p / "task.toml").is_file()):
        if task.name == ONLINE:
            continue
        copy = tasks / task.name
        shutil.copytree(task, copy)
        tag = f"{HARBOR_REPO}:{task.name}-{nonce}"
        dockerfile = (copy / "environment" / "Dockerfile").read_text()
        # No registry here: the bootstrapped base stands for debian:bookworm-slim, as
        # examhall's image map has it.
        dockerfile = dockerfile.replace(
            "FROM debian:bookworm-slim", "FROM examhall/debian-base:bookworm"
        )
        (copy / "environment" / "Dockerfile").write_text(dockerfile)
        started = time.perf_counter()
        subprocess.run(
            ["docker", "build", "-q", "-t", tag, str(copy / "environment")],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        built[task.name] = round(time.perf_counter() - started, 1)
        toml = (copy / "task.toml").read_text()
        # Harbor's own no-network mode needs a sidecar it pulls; the overlay takes the
        # network away instead (bench/harbor/no-network.yaml).
        toml = re.sub(r"(?m)^(network_mode|allow_internet) = .*\n", "", toml)
        toml = toml.replace("[environment]\n", f'[environment]\ndocker_image = "{tag}"\n', 1)
        (copy / "task.toml").write_text(toml)
    results = {}
    cases = len(built)
    try:
        for agent in ("oracle", "nop"):
            results[agent] = _harbor.run_harbor(
                runner, root, cases, concurrency, "harbor", cases, tasks=tasks, agent=agent
            )
    finally:
        for tag in (f"{HARBOR_REPO}:{task}-{nonce}" for task in built):
            subprocess.run(["docker", "rmi", "-f", tag], capture_output=True, check=False)
    return {
        "image_builds_s": built,
        "image_builds_total_s": round(sum(built.values()), 1),
        **results,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--harbor", action="store_true", help="run Harbor's oracle and nop too")
    parser.add_argument(
        "--concurrency", type=int, default=os.cpu_count() or 1,
        help="Harbor's --n-concurrent (examhall's local control plane runs as many trials at "
        "once as the machine has CPUs, EXAMHALL_MAX_CONTAINERS)",
    )  # fmt: skip
    parser.add_argument("--keep", action="store_true", help="keep the environments built")
    args = parser.parse_args()
    nonce = uuid.uuid4().hex[:10]
    out: dict[str, Any] = {"machine": machine(), "nonce": nonce}
    with tempfile.TemporaryDirectory(prefix="examhall-bench-check-") as scratch:
        root = Path(scratch)
        with PackageIndex(DEMO / "python-project" / "environment" / "wheels") as index:
            suite = copy_set(root, nonce, index.url)
            env = {
                **os.environ,
                "PYTHONPATH": str(REPO),
                "EXAMHALL_EGRESS_POLICIES": f"local=127.0.0.2:{index.port}",
            }
            database = root / "bench.db"
            try:
                out["cold"] = check(suite, database, env)
                print(f"cold: {out['cold']['seconds']} s", file=sys.stderr)
                out["cached"] = check(suite, database, env)
                print(f"cached: {out['cached']['seconds']} s", file=sys.stderr)
            finally:
                images = env_images(database) if database.exists() else []
                out["images"] = images
                if not args.keep:
                    for image in images:
                        subprocess.run(["docker", "rmi", image], capture_output=True, check=False)
        if args.harbor:
            out["harbor"] = harbor_side(suite, root, nonce, args.concurrency)
    headers = ["run", "seconds", "environments built", "passed"]

    def passed(run: dict[str, Any], agent: str) -> str:
        return str(sum(1 for row in run["rows"] if row[agent] == "passed"))

    rows: list[list[Any]] = []
    for name in ("cold", "cached"):
        run = out[name]
        # A warning is a sound task whose test.sh runs the agent's files.
        sound = sum(1 for verdict in run["verdicts"].values() if verdict in ("sound", "warning"))
        rows.append(
            [
                f"examhall check-tasks, {name} ({sound}/{len(run['verdicts'])} sound)",
                run["seconds"],
                len(run["built"]),
                f"oracle {passed(run, 'oracle')}, nop {passed(run, 'nop')}",
            ]
        )
    if "harbor" in out:
        harbor = out["harbor"]
        built = len(harbor["image_builds_s"])
        rows.append(
            ["Harbor: its images (docker build)", harbor["image_builds_total_s"], built, ""]
        )
        for agent in ("oracle", "nop"):
            run = harbor[agent]
            rows.append(
                [
                    f"Harbor {agent} (job; wall {run['wall_s']:.1f} s)",
                    round(run["seconds"], 1),
                    0,
                    f"{run['passed']} of {run['trials']} ({run['errors']} errors)",
                ]
            )
    print(table(headers, rows))
    if "harbor" in out:
        out["agreement"] = agreement(out["cold"]["verdicts"], out["harbor"])
        print(
            table(
                ["task", "examhall", "Harbor", "agree"],
                [[t, *row.values()] for t, row in out["agreement"]["tasks"].items()],
            )
        )
        print(
            f"agree on {out['agreement']['agree']} of {len(out['agreement']['tasks'])} tasks; "
            f"Harbor calls {out['agreement']['harbor_sound']} sound, examhall "
            f"{out['agreement']['examhall_sound']}"
        )
    write_json("check_tasks", out)
    return 0


def agreement(examhall: dict[str, str], harbor: dict[str, Any]) -> dict[str, Any]:
    """Each task Harbor ran: sound by each tool (a warning is sound: it only reads test.sh).
    Harbor's verdict is check-tasks' rule on its trials: every oracle trial rewarded 1 without
    an exception, and no nop trial so."""

    def ran(agent: str, task: str) -> list[tuple[float | None, str | None]]:
        return [(reward, error) for reward, error in harbor[agent]["by_task"].get(task, [])]

    tasks: dict[str, dict[str, Any]] = {}
    for task in sorted(harbor["oracle"]["by_task"]):
        oracle, nop = ran("oracle", task), ran("nop", task)
        sound = all(r == 1 and e is None for r, e in oracle) and not any(r == 1 for r, _ in nop)
        ours = "sound" if examhall.get(task) in ("sound", "warning") else examhall.get(task, "-")
        theirs = "sound" if sound else "broken"
        tasks[task] = {"examhall": ours, "harbor": theirs, "agree": ours == theirs}
    return {
        "tasks": tasks,
        "agree": sum(1 for row in tasks.values() if row["agree"]),
        "harbor_sound": sum(1 for row in tasks.values() if row["harbor"] == "sound"),
        "examhall_sound": sum(1 for row in tasks.values() if row["examhall"] == "sound"),
    }


if __name__ == "__main__":
    sys.exit(main())
