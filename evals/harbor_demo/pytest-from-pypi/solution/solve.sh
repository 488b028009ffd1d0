#!/bin/bash
# The reference solution: runs as the agent's unprivileged user, in /app, with no network.
set -euo pipefail
tr -cs 'A-Za-z' '\n' < /app/book.txt | tr 'A-Z' 'a-z' | grep -v '^$' | sort | uniq -c \
    | sort -k1,1nr -k2,2 | head -5 | awk '{print $2, $1}' > /app/top_words.txt
