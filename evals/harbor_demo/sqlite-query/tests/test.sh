#!/bin/bash
# Runs as root after the agent has stopped; the base's Python only, no network.
set -u
mkdir -p /logs/verifier
if python3 /tests/check.py; then
    echo 1 > /logs/verifier/reward.txt
else
    echo 0 > /logs/verifier/reward.txt
fi
