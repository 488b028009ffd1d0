#!/bin/bash
# Runs as root after the agent has stopped, in /app, as Harbor's verifier does: the agent's
# package is run as a module from the working directory, as its users would run it.
set -u
mkdir -p /logs/verifier
printf 'one two  three\nfour\tfive\n\nsix\n' > /tmp/words.txt
got=$(cd /app && python3 -m tally /tmp/words.txt 2>&1)
echo "python3 -m tally: $got"
if [ "$got" = 6 ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt
