"""Exec a command as uid 0 holding no capability: how the task verifier runs.

Started by the root supervisor as `python3 -I -c ... COMMAND ARGS...`; it drops every
capability, puts itself first in line for the OOM killer (the verifier's memory is not the
harness's), and execs the command with the environment it was given.
"""

from __future__ import annotations

import contextlib
import os
import sys

from sandbox import privilege


def main() -> None:
    command = sys.argv[1:]
    if not command:
        sys.exit("capless: no command given")
    # Without it the score stays the kernel's default; the supervisor is exempt either way.
    with contextlib.suppress(OSError):
        privilege.set_oom_score_adj(privilege.OOM_FIRST)
    privilege.drop_all_capabilities()
    os.execvpe(command[0], command, dict(os.environ))
