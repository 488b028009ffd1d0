#!/bin/bash
# The reference solution: runs as the agent's unprivileged user, in /app, with no network.
set -euo pipefail
cp /solution/query.sql /app/query.sql
# Try it on the sample database.
python3 -c "import sqlite3; print(sqlite3.connect('/app/shop.db').execute(open('/app/query.sql').read()).fetchall())"
