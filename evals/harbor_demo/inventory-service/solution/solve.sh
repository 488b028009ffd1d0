#!/bin/bash
# The reference solution: runs as the agent's unprivileged user, in /app, with no network
# but loopback. It starts the service in the background, reads every page, and stops it.
set -euo pipefail
python3 /opt/inventory/server.py &
server=$!
trap 'kill $server' EXIT
python3 /solution/client.py http://127.0.0.1:8765 /app/reorder.json
