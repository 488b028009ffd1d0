#!/bin/bash
# The reference solution: runs as the agent's unprivileged user, in /app, with no network.
# Its jq program is the file beside it: the whole solution/ directory is in /solution.
set -euo pipefail
jq -f /solution/filter.jq /app/data.json > /app/out.json
