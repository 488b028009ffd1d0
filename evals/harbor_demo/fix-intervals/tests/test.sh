#!/bin/bash
# Runs as root after the agent has stopped; unittest from the base's Python, no network.
# The agent's module is imported from /app; the tests are the verifier's, in /tests.
set -u
mkdir -p /logs/verifier
if PYTHONPATH=/app python3 -m unittest discover -s /tests -t /tests -p 'test_*.py' -v; then
    echo 1 > /logs/verifier/reward.txt
else
    echo 0 > /logs/verifier/reward.txt
fi
