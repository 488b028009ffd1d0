#!/bin/bash
# The reference solution: runs as the agent's unprivileged user, in /app, with no network.
set -euo pipefail
printf '#!/bin/sh\necho "$(id -un) $(id -u)"\n' > report.sh
chmod +x report.sh
