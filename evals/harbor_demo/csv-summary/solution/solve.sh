#!/bin/bash
# The reference solution: runs as the agent's unprivileged user, in /app, with no network.
# It is three files, as Harbor's solutions often are: this script, the program beside it and
# the program's data (the rates), all in /solution.
set -euo pipefail
python3 /solution/solve.py /app/orders.csv /app/summary.json
