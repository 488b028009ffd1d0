#!/bin/bash
# The reference solution: runs as the agent's unprivileged user, in /app, with no network.
set -euo pipefail
jq '[.[] | select(.license == "MIT")] | sort_by(-.size_kb) | map(.name)' /app/data.json > /app/out.json
