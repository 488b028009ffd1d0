# A swarm node for the test cluster: Debian's own Docker engine (docker.io) in a container.
# Built by tests/swarm/cluster.py on the bootstrapped Debian base (nothing can be pulled here).
ARG BASE=examhall/debian-base:bookworm
FROM ${BASE}

# iptables and iproute2: dockerd programs its bridge, NAT and overlay networks with them.
# ca-certificates: for a TLS registry, should a test ever use one (ours is plain HTTP).
# procps: `ps` and `free` for looking inside a node when a test fails.
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      docker.io iptables iproute2 ca-certificates procps \
 && rm -rf /var/lib/apt/lists/*

COPY dockerd-entrypoint.sh /usr/local/bin/dockerd-entrypoint.sh
# The engine's state: cluster.py mounts a labelled anonymous volume here, so the node's images
# and containers live on the host's ext4 (overlay2 works there) rather than on the node's own
# (fuse-)overlay root, which overlay2 cannot nest on.
VOLUME /var/lib/docker
EXPOSE 2375 2377 7946 4789/udp
ENTRYPOINT ["/usr/local/bin/dockerd-entrypoint.sh"]
