#!/bin/bash
# Runs as root after the agent has stopped, in /srv/ledger: the task's workdir is a
# directory of its own (no link), where the agent's files are.
set -u
mkdir -p /logs/verifier
ok=1
[ "$(pwd)" = /srv/ledger ] || { echo "verifier cwd: $(pwd)"; ok=0; }
[ -d /srv/ledger ] && [ ! -L /srv/ledger ] || { echo "/srv/ledger is not a directory"; ok=0; }
[ "$(cat where.txt 2>/dev/null)" = /srv/ledger ] || { echo "where.txt: $(cat where.txt 2>&1)"; ok=0; }
[ "$(cat total.txt 2>/dev/null)" = 55 ] || { echo "total.txt: $(cat total.txt 2>&1)"; ok=0; }
echo $ok > /logs/verifier/reward.txt
