#!/bin/bash
# The reference solution: runs as the agent's unprivileged user, in /app, with no network.
set -euo pipefail
mkdir -p tally
touch tally/__init__.py
cat > tally/__main__.py <<'PY'
import sys

with open(sys.argv[1]) as handle:
    print(len(handle.read().split()))
PY
