"""Exec a command as uid 0 holding only the capabilities named, or none: how the task
verifier runs.

Started by the root supervisor as `python3 -I -S -c ... ENV_JSON KEEP COMMAND ARGS...`, KEEP
a comma-separated list of capability numbers ("" for none); it sets no_new_privs itself (so
no exec can give a capability back, whatever the engine set), drops every capability not in
KEEP from every set, the bounding set included, puts itself first in line for the OOM killer
(the verifier's memory is not the harness's), and execs the command with the environment
ENV_JSON names, and only it.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys

from sandbox import privilege


def main() -> None:
    if len(sys.argv) < 4:
        sys.exit(
            "capless: give the command's environment (JSON), the kept capabilities and the command"
        )
    env = json.loads(sys.argv[1])
    keep = frozenset(int(number) for number in sys.argv[2].split(",") if number)
    command = sys.argv[3:]
    # Without it the score stays the kernel's default; the supervisor is exempt either way.
    with contextlib.suppress(OSError):
        privilege.set_oom_score_adj(privilege.OOM_FIRST)
    privilege.set_no_new_privs()
    if keep:
        privilege.keep_only_capabilities(keep)
    else:
        privilege.drop_all_capabilities()
    os.execvpe(command[0], command, {str(k): str(v) for k, v in env.items()})
