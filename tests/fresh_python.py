"""Code run in a fresh interpreter, started as the sandbox image starts the worker (-S -P),
for tests of what a trial's start loads and compiles: the test process has loaded it all."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def run_fresh(code: str) -> Any:
    """Run `code` with the checkout on the path; what it printed, as JSON."""
    done = subprocess.run(
        [sys.executable, "-S", "-P", "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT)},
    )
    return json.loads(done.stdout)
