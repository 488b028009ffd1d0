# Debian trixie with Docker's CLI and Compose v2 (Debian's docker-compose 2.x), to run
# `docker compose` against the host's engine through its mounted socket: tests/compose/ runs
# the box with it, and bench/harbor/runner.Dockerfile builds Harbor's runner on it.
# service/images/compose_v2.py builds it on a bootstrapped base (nothing can be pulled here).
ARG BASE=examhall/debian-base:trixie
FROM ${BASE}

RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      docker-cli docker-compose \
 && rm -rf /var/lib/apt/lists/* \
 && docker compose version
