"""A container under an engine with `userns-remap` runs in a user namespace of its own, where
the kernel refuses even a root holding CAP_SYS_RESOURCE to lower an OOM score: the worker
then runs without its OOM exemption, saying why, instead of failing every trial (`could not
exempt the worker from the OOM killer`). Tried for real in a user namespace that maps root to
the caller's uid, as userns-remap maps it to an unprivileged one."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from sandbox import privilege

ROOT = Path(__file__).resolve().parents[2]


def test_the_hosts_own_user_namespace_is_told_from_a_remapped_one() -> None:
    assert not privilege.in_user_namespace("         0          0 4294967295\n")
    assert privilege.in_user_namespace("         0     165536      65536\n")
    assert privilege.in_user_namespace("         0          0          1\n")


@pytest.mark.skipif(
    shutil.which("unshare") is None or os.geteuid() != 0,
    reason="needs util-linux's unshare and root, as the CI machine has",
)
def test_in_a_user_namespace_the_worker_goes_on_without_its_oom_exemption() -> None:
    probe = (
        "from sandbox import privilege\n"
        "try:\n"
        "    privilege.set_oom_score_adj(privilege.OOM_EXEMPT)\n"
        "    print('exempted')\n"
        "except OSError as exc:\n"
        "    print('refused:', exc.errno)\n"
        "print(privilege.protect_from_oom())\n"
    )
    done = subprocess.run(
        ["unshare", "--user", "--map-root-user", sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    refused, why = done.stdout.splitlines()
    # What every trial met under userns-remap: the kernel refuses the write...
    assert refused.startswith("refused:"), done.stdout
    # ...and the worker now says why it goes on without the exemption.
    assert "user namespace of its own" in why and "limit_exceeded" in why, why
