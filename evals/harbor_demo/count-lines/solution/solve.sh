#!/bin/bash
# The reference solution: runs as the agent's unprivileged user, in /app, with no network.
set -euo pipefail
cd /app/logs
total=0
: > /app/report.txt
for file in $(ls | sort); do
    count=$(grep -c 'ERROR' "$file" || true)
    echo "$file $count" >> /app/report.txt
    total=$((total + count))
done
echo "total $total" >> /app/report.txt
