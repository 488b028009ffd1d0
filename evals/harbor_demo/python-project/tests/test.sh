#!/bin/bash
# Runs as root after the agent has stopped. pytest is in the image (environment/Dockerfile
# installs the vendored wheels); nothing comes from the network. The agent's package is
# imported from /app; /tests holds the verifier's own tests.
set -u
mkdir -p /logs/verifier
if PYTHONPATH=/app python3 -m pytest -q -p no:cacheprovider --rootdir=/tests /tests/test_outputs.py; then
    echo 1 > /logs/verifier/reward.txt
else
    echo 0 > /logs/verifier/reward.txt
fi
