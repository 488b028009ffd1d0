#!/bin/bash
# Runs as root after the agent has stopped, as Harbor's verifier does: it adds a user of its
# own (the root file system is the container's, writable) and runs the agent's script as
# that user, as tests that check a program's behaviour for an unprivileged user do.
set -u
mkdir -p /logs/verifier
useradd --create-home --shell /bin/sh auditor || { echo "useradd failed"; echo 0 > /logs/verifier/reward.txt; exit 0; }
want="auditor $(id -u auditor)"
got=$(su auditor -s /bin/sh -c /app/report.sh 2>&1)
echo "as auditor: $got"
if [ "$got" = "$want" ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt
