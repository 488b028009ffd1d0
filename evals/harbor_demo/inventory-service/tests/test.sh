#!/bin/bash
# Runs as root after the agent has stopped (every process the agent started is gone by now,
# its service too). It starts the service again from /opt, where the agent could not write,
# and compares the agent's answer with what the service says.
set -u
mkdir -p /logs/verifier
python3 /opt/inventory/server.py 8766 &
server=$!
python3 /tests/check.py http://127.0.0.1:8766
status=$?
kill "$server"
case $status in
    0) echo 1 > /logs/verifier/reward.txt ;;
    1) echo 0 > /logs/verifier/reward.txt ;;
    # The service did not answer: no reward, so the run is the verifier's error.
    *) exit 1 ;;
esac
