#!/bin/bash
# The reference solution: runs as the agent's unprivileged user, in /app, with no network.
# The fixed module is the file beside this one.
set -euo pipefail
cp /solution/slug.py /app/textkit/slug.py
python3 -m pytest -q -p no:cacheprovider /app/tests
