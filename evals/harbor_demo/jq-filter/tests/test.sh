#!/bin/bash
# Runs as root after the agent has stopped; needs jq and nothing from the network.
set -u
mkdir -p /logs/verifier
reward=/logs/verifier/reward.txt

want='["yamlette","quickhash","tinyparse","colorize"]'
if [ ! -f /app/out.json ]; then
    echo "FAIL: /app/out.json does not exist"
    echo 0 > "$reward"
elif jq -e --argjson want "$want" '. == $want' /app/out.json >/dev/null 2>&1; then
    echo PASS
    echo 1 > "$reward"
else
    echo "FAIL: /app/out.json is $(head -c 300 /app/out.json), expected $want"
    echo 0 > "$reward"
fi
