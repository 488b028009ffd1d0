# The test cluster's image registry: Debian's docker-registry (distribution 2.8), plain HTTP on
# :5000, blobs on the container's filesystem (the cluster is thrown away after the tests).
ARG BASE=examhall/debian-base:bookworm
FROM ${BASE}

RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends docker-registry \
 && rm -rf /var/lib/apt/lists/*

# The package's own config asks for htpasswd auth; ours has none (test-only, private network).
COPY registry.yml /etc/docker/registry/config.yml
EXPOSE 5000
ENTRYPOINT ["/usr/bin/docker-registry", "serve", "/etc/docker/registry/config.yml"]
