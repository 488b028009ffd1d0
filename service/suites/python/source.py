"""Python suites: a module of evals/ by its name, or a file by its path, as the source a job
carries. Nothing here imports it: its cases are listed by importing it in a sandbox
(service/scheduler/listing.py), the way pi-evals discovers cases inside its container."""

from __future__ import annotations

import hashlib
from pathlib import Path

from sandbox.protocol import SuiteBundle
from service.suites.base import SuiteError, shipped_dir

MAX_SUITE_BYTES = 1024 * 1024


def shipped_suites() -> list[str]:
    return sorted(p.stem for p in shipped_dir().glob("*.py") if not p.stem.startswith("_"))


def load_suite(ref: str) -> SuiteBundle:
    """A suite by path (`evals/smoke.py`) or by shipped name (`smoke`)."""
    path = Path(ref)
    if not path.is_file():
        if ref in shipped_suites():
            path = shipped_dir() / f"{ref}.py"
        else:
            raise SuiteError(
                f"Suite {ref!r} is neither a file nor a shipped suite; "
                f"shipped suites: {', '.join(shipped_suites())}."
            )
    data = path.read_bytes()
    if len(data) > MAX_SUITE_BYTES:
        raise SuiteError(f"Suite {ref} is {len(data)} bytes; the limit is {MAX_SUITE_BYTES}.")
    return SuiteBundle(name=path.stem, source=data.decode())


def suite_sha256(bundle: SuiteBundle) -> str:
    return hashlib.sha256(bundle.source.encode()).hexdigest()
