#!/bin/bash
# The reference solution: runs as the agent's unprivileged user, in /app, with no network.
set -euo pipefail
export LC_ALL=C
awk '$9 ~ /^5[0-9][0-9]$/ { print $1 }' /app/access.log | sort | uniq -c \
    | sort -k1,1nr -k2,2 | head -3 | awk '{ print $2, $1 }' > /app/top_errors.txt
