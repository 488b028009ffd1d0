#!/bin/bash
# Runs as root after the agent has stopped, as Harbor's verifier does: it installs its
# checker as a Debian package (dpkg writes /var/lib/dpkg and /usr: the root file system is
# the container's, writable), as tests that install their tools with apt do, offline.
set -u
mkdir -p /logs/verifier /tmp/pkg/DEBIAN /tmp/pkg/usr/local/bin
printf 'Package: examhall-checker\nVersion: 1.0\nArchitecture: all\nMaintainer: examhall\nDescription: the task checker\n' \
    > /tmp/pkg/DEBIAN/control
printf '#!/bin/sh\nsort -c "$1" && [ "$(wc -l < "$1")" = 5 ]\n' > /tmp/pkg/usr/local/bin/check-sorted
chmod 0755 /tmp/pkg/usr/local/bin/check-sorted
if ! { dpkg-deb --build /tmp/pkg /tmp/checker.deb >/dev/null && dpkg -i /tmp/checker.deb; }; then
    echo "could not install the checker"
    echo 0 > /logs/verifier/reward.txt
    exit 0
fi
if check-sorted /app/sorted.txt; then echo 1; else echo 0; fi > /logs/verifier/reward.txt
