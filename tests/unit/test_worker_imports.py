"""Every trial's container starts the worker's interpreter afresh, so what the worker imports
at its start is paid by every trial (bench/trial_overhead.py). What only some trials use is
imported by those alone: this holds that line, by name, without timing anything."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

from sandbox import digests

ROOT = Path(__file__).resolve().parents[2]

# Only some trials need these: self-confinement and the network cut (Swarm: socket), task trials
# (their built-in agents, the verifier), external agents (their HTTP endpoint), the
# simulated model, direct credentials (the provider clients); and OpenSSL (sandbox/digests.py).
ONLY_SOME_TRIALS = (
    "sandbox.seccomp_filter",
    "sandbox.syscalls",
    "sandbox.task_case",
    "sandbox.external",
    "sandbox.endpoint",
    "sandbox.verifier",
    "sandbox.simulated",
    "sandbox.direct",
    "sandbox.providers",
    "http.server",
    "http.client",
    "ssl",
    "hashlib",
    "_hashlib",
    "socket",
)


def modules_at_start() -> set[str]:
    """The modules loaded by importing the worker as its container starts it (-S -P)."""
    done = subprocess.run(
        [
            sys.executable,
            "-S",
            "-P",
            "-c",
            "import json, sys; import sandbox.worker; print(json.dumps(sorted(sys.modules)))",
        ],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT)},
    )
    return set(json.loads(done.stdout))


def test_the_worker_imports_at_its_start_only_what_every_trial_uses() -> None:
    loaded = modules_at_start()
    assert "sandbox.worker" in loaded
    early = sorted(
        name
        for name in loaded
        if any(name == m or name.startswith(m + ".") for m in ONLY_SOME_TRIALS)
    )
    assert early == [], f"imported at the worker's start, though only some trials use them: {early}"


def test_the_lean_sha256_gives_hashlib_s_digests() -> None:
    for data in (b"", b"abc", bytes(range(256)) * 1000):
        assert digests.sha256(data).hexdigest() == hashlib.sha256(data).hexdigest()
        assert digests.sha256(data).digest() == hashlib.sha256(data).digest()
