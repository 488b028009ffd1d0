#!/bin/bash
# The reference solution: runs as the agent's unprivileged user, in /app, with no network.
set -euo pipefail
mkdir -p bin
printf '#!/bin/sh\nexec tr "[:lower:]" "[:upper:]"\n' > bin/shout
chmod +x bin/shout
