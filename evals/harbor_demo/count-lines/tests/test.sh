#!/bin/bash
# Runs as root after the agent has stopped; coreutils only. Writes reward.json, Harbor's
# other reward form, with the reward and the number of report lines that were right.
set -u
mkdir -p /logs/verifier

expected=$(printf '%s\n' 'api.log 2' 'db.log 4' 'worker.log 0' 'total 6')
right=0
if [ -f /app/report.txt ]; then
    while IFS= read -r line; do
        grep -qxF -- "$line" /app/report.txt && right=$((right + 1))
    done <<< "$expected"
fi
if [ -f /app/report.txt ] && [ "$(cat /app/report.txt)" = "$expected" ]; then
    echo PASS
    reward=1
else
    echo "FAIL: /app/report.txt is not the expected report:"
    echo "$expected"
    reward=0
fi
printf '{"reward": %s, "lines_right": %s}\n' "$reward" "$right" > /logs/verifier/reward.json
