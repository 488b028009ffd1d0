#!/bin/bash
# The reference solution: runs as the task's agent user, in /app, with no network.
set -euo pipefail
whoami > /app/whoami.txt
echo done > /logs/agent/notes.txt
