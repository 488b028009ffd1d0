# The control plane of the shared eval box (the HTTP API and the scheduler), run by compose.yaml.
# It starts each trial's sandbox through the Docker socket that compose.yaml mounts into this
# container only, and builds the sandbox image on its first start from the copies of docker/
# and sandbox/ below (service/images/sandbox_image.py looks for them beside service/).
#
# The context is laid out like the repository. Two ways to build it:
# - `examhall box build` (service/cli/box.py) adds wheels/ with the dependencies downloaded on the
#   host, so nothing is fetched inside the build: BASE may be the bootstrapped
#   examhall/debian-base, which has no pip, on a box whose containers cannot reach the index.
# - `docker compose build` on a box with a registry: no wheels/, so BASE's own pip installs
#   the dependencies from the index (python:3.11-slim has one).
ARG BASE=python:3.11-slim
FROM ${BASE}

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 LANG=C.UTF-8 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONPATH=/opt/examhall/src:/opt/examhall/lib \
    EXAMHALL_DATABASE_URL=sqlite:////data/examhall.db
# The SQLite store (and a ./providers.toml, if one is put there) live in the data volume.
WORKDIR /data
EXPOSE 8000
# Neither base has curl. /healthz needs no token; the start period covers the first start,
# which builds the sandbox image before the port opens.
HEALTHCHECK --interval=10s --timeout=5s --start-period=300s --retries=3 \
  CMD ["python3", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=4)"]
ENTRYPOINT ["examhall"]
CMD ["serve", "--host", "0.0.0.0", "--port", "8000"]

# Dependencies before the code, so that a change to the code reuses this layer. The glob lets
# the COPY match nothing when there is no wheels/. They go to a directory of their own, which
# works alike on python:*-slim and on Debian's python3 (whose pip refuses system installs).
# The requirements are the project's dependencies plus the PostgreSQL driver (extra
# "postgres"), as service/cli/box.py's requirements() reads them.
COPY pyproject.toml wheel[s] /tmp/examhall-deps/
RUN python3 -c "import sys; sys.exit(0 if sys.version_info >= (3, 11) else 'examhall: the control plane needs python3 >= 3.11, the base image has ' + sys.version)" \
 && cd /tmp/examhall-deps \
 && python3 -c "import tomllib; p = tomllib.load(open('pyproject.toml', 'rb'))['project']; print('\n'.join(p['dependencies'] + p['optional-dependencies']['postgres']))" > requirements.txt \
 && if ls pip-*.whl > /dev/null 2>&1; then \
      pip="python3 $(ls pip-*.whl)/pip"; offline="--no-index --find-links ."; \
    elif python3 -m pip --version > /dev/null 2>&1; then \
      pip="python3 -m pip"; offline=""; \
    else \
      echo "examhall: the base image has no pip and the build context no wheels/; build with" \
           "\`examhall box build\`, which downloads them on the host, or use a base with pip." >&2; \
      exit 1; \
    fi \
 && $pip install $offline --no-cache-dir --root-user-action=ignore --target /opt/examhall/lib \
      -r requirements.txt \
 && cd / && rm -rf /tmp/examhall-deps

COPY pyproject.toml /opt/examhall/src/pyproject.toml
COPY docker /opt/examhall/src/docker
COPY sandbox /opt/examhall/src/sandbox
COPY evals /opt/examhall/src/evals
# The library: the CLI's client commands are built on it.
COPY examhall /opt/examhall/src/examhall
COPY service /opt/examhall/src/service
# Run from the source tree rather than installed: the sandbox image is built from it.
# Importing the app here fails the build, not the first start, when a dependency is missing.
RUN printf '#!/bin/sh\nexec python3 -m service.cli "$@"\n' > /usr/local/bin/examhall \
 && chmod 0755 /usr/local/bin/examhall \
 && python3 -m compileall -q /opt/examhall/src \
 && python3 -c "import psycopg, service.app" \
 && examhall --help > /dev/null
