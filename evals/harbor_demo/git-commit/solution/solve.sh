#!/bin/bash
# The reference solution: runs as the agent's unprivileged user, in /app, with no network.
# The author comes from [solution.env] in task.toml.
set -euo pipefail
cd /app
git init -q .
git add notes.txt
git commit -q -m "Add release notes"
