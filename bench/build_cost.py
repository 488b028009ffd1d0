"""What the isolated build costs: three of evals/harbor_demo's environments built for the first
time and found again (a cache hit), by this tree's builder and by a baseline commit's, side by
side in one run.

    python3 bench/build_cost.py [--rounds 2] [--baseline 7061c28]

The baseline is checked out into a temporary worktree; each side runs in a fresh interpreter
of its own tree, alternating (A B A B ...). Every round gives each task's Dockerfile a new
label after its FROM, so a "first build" runs every step (the engine's layer cache would
otherwise serve the second side from the first's), and builds into a repository of its own,
removed afterwards. The steps need Debian's mirror (apt installs git and jq).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

from _common import median, table, write_json

ROOT = Path(__file__).resolve().parent.parent

# Runs in the side's own tree: builds the three environments, then finds them again.
_SIDE = r"""
import dataclasses, json, sys, time
from pathlib import Path
import docker
from service.images.sandbox_image import ensure_sandbox_image
from service.environments import EnvironmentBuilder, directory_source
from service.images.docker_engine import DockerImageEngine

root, nonce = Path(sys.argv[1]), sys.argv[2]
client = docker.from_env()
repository = f"examhall-bench-{nonce}/env"
builder = EnvironmentBuilder(
    DockerImageEngine(client), sandbox_image=ensure_sandbox_image(client, progress=lambda _: None),
    repository=repository,
)
sources = []
# The set's first three tasks, which every tree since the baseline has: the set has grown
# since, and both sides must build the same environments.
for name in ("count-lines", "git-commit", "jq-filter"):
    task = root / "evals" / "harbor_demo" / name
    made = directory_source(f"bench {task.name}", task / "environment")
    lines = made.files["Dockerfile"].decode().splitlines()
    lines.insert(1, f"LABEL examhall.bench={nonce}")
    files = {**made.files, "Dockerfile": ("\n".join(lines) + "\n").encode()}
    sources.append(dataclasses.replace(made, files=files))
try:
    started = time.perf_counter()
    for source in sources:
        builder.build(source, lambda _: None)
    first = time.perf_counter() - started
    started = time.perf_counter()
    for source in sources:
        builder.build(source, lambda _: None)
    cached = time.perf_counter() - started
finally:
    for image in client.images.list(name=repository):
        for tag in image.tags:
            client.images.remove(tag, force=True)
print(json.dumps({"first_build_s": first, "cached_s": cached}))
"""


def run_side(tree: Path) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, "-c", _SIDE, str(tree), uuid.uuid4().hex[:10]],
        cwd=tree,
        env={"PYTHONPATH": str(tree), "PATH": "/usr/local/bin:/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"the side in {tree} failed:\n{done.stderr[-3000:]}")
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=2, help="builds per side (default 2)")
    parser.add_argument("--baseline", default="7061c28", help="the commit to compare with")
    parser.add_argument("--json", help="output file (default bench/results/build_cost.json)")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="examhall-bench-baseline-") as scratch:
        baseline = Path(scratch) / "tree"
        subprocess.run(
            ["git", "worktree", "add", "--detach", str(baseline), args.baseline],
            cwd=ROOT, check=True, capture_output=True,
        )  # fmt: skip
        try:
            sides = {f"baseline {args.baseline}": baseline, "this tree": ROOT}
            samples: dict[str, list[dict[str, float]]] = {name: [] for name in sides}
            for round_ in range(args.rounds):
                for name, tree in sides.items():
                    got = run_side(tree)
                    samples[name].append(got)
                    print(f"round {round_ + 1}, {name}: {got}", flush=True)
        finally:
            subprocess.run(
                ["git", "worktree", "remove", "--force", str(baseline)],
                cwd=ROOT, check=False, capture_output=True,
            )  # fmt: skip

    def med(name: str, key: str) -> float:
        value = median([s[key] for s in samples[name]])
        assert value is not None
        return value

    rows = [[name, med(name, "first_build_s"), med(name, "cached_s")] for name in samples]
    print()
    print(table(["side", "first build s (3 envs)", "cache hit s (3 envs)"], rows))
    base, ours = (f"baseline {args.baseline}", "this tree")
    ratios = {
        "first_build": med(ours, "first_build_s") / med(base, "first_build_s"),
        "cached": med(ours, "cached_s") / med(base, "cached_s"),
    }
    print(
        f"\nratio this tree / baseline: first build {ratios['first_build']:.3f}x, "
        f"cache hit {ratios['cached']:.3f}x"
    )
    write_json(
        "build_cost",
        {"rounds": args.rounds, "baseline": args.baseline, "samples": samples, "ratio": ratios},
        args.json,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
