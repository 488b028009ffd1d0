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
# simulated model, direct credentials (the provider clients), a relayed model, a judge
# model, a command run by the bash tool (subprocess, selectors), a failure's traceback; and
# OpenSSL (sandbox/digests.py). `inspect` (with ast, dis, tokenize) is deferred
# (sandbox/lazy.py) and no class of the start needs it.
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
    "sandbox.relay",
    "sandbox.graded",
    "subprocess",
    "selectors",
    "traceback",
    "inspect",
    "ast",
    "dis",
    "tokenize",
)


def modules_at_start() -> set[str]:
    """The modules loaded by importing the worker as its container starts it (-S -P); a
    deferred module counts once it has been used."""
    done = subprocess.run(
        [
            sys.executable,
            "-S",
            "-P",
            "-c",
            "import json, sys; import sandbox.worker; from sandbox import lazy; "
            "print(json.dumps(sorted(name for name in sys.modules if lazy.loaded(name))))",
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
