#!/bin/bash
# Runs as root after the agent has stopped. The agent ran as the user task.toml names
# ([agent].user = "agent"), with its log directory where Harbor lays it out.
set -u
mkdir -p /logs/verifier
ok=1
[ "$(cat /app/whoami.txt 2>/dev/null)" = agent ] || { echo "whoami.txt: $(cat /app/whoami.txt 2>&1)"; ok=0; }
[ "$(cat /logs/agent/notes.txt 2>/dev/null)" = done ] || { echo "no /logs/agent/notes.txt"; ok=0; }
id agent || ok=0
echo $ok > /logs/verifier/reward.txt
