#!/bin/bash
# Runs as root after the agent has stopped, as Harbor's verifier does: it runs the agent's
# program where the agent left it, from /tmp, and installed into /usr/local/bin.
set -u
mkdir -p /logs/verifier
ok=1
[ "$(echo hello | /app/bin/shout)" = HELLO ] || { echo "in /app: $(echo hello | /app/bin/shout 2>&1)"; ok=0; }
cp /app/bin/shout /tmp/shout && [ "$(echo tmp | /tmp/shout)" = TMP ] || { echo "in /tmp: $(echo tmp | /tmp/shout 2>&1)"; ok=0; }
install -m 0755 /app/bin/shout /usr/local/bin/shout && [ "$(echo path | shout)" = PATH ] || { echo "installed: failed"; ok=0; }
echo $ok > /logs/verifier/reward.txt
