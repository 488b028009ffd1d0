#!/bin/sh
# Start a Docker engine inside a (nearly privileged) container; see NODE_RUN_OPTIONS in
# tests/swarm/cluster.py for why it is not started with --privileged.
set -eu

# Without --privileged, Docker mounts /sys, /proc/sys and the cgroup v1 hierarchies read-only.
# The inner engine writes to all of them (sysctls such as ip_forward, cgroups of its
# containers). The node runs in a private cgroup namespace and network namespace, so making
# them writable lets it change only its own subtree and its own network stack.
mount -o remount,bind,rw /sys
mount -o remount,bind,rw /proc/sys
for mountpoint in $(awk '$3 == "cgroup" { print $2 }' /proc/mounts); do
    mount -o remount,bind,rw "$mountpoint"
done

# tcp://0.0.0.0:2375 without TLS is for this test cluster only: it is reachable on the
# cluster's private bridge and on a 127.0.0.1 port of the host. --tls=false skips the 15 s
# startup delay dockerd adds to warn about an unauthenticated TCP socket.
exec dockerd \
    --host unix:///var/run/docker.sock \
    --host tcp://0.0.0.0:2375 \
    --tls=false \
    --storage-driver "${EXAMHALL_NODE_STORAGE_DRIVER:-overlay2}" \
    --insecure-registry "${EXAMHALL_REGISTRY:-registry:5000}" \
    "$@"
