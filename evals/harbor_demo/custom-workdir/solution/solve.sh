#!/bin/bash
# The reference solution: runs as the agent's unprivileged user, in the task's workdir.
set -euo pipefail
awk -F, 'NR > 1 { s += $2 } END { print s }' entries.csv > total.txt
pwd > where.txt
