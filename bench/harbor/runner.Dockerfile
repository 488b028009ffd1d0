# The Harbor side of bench/throughput.py. Harbor (PyPI `harbor`) needs Python >= 3.12 and this
# machine's is bookworm's 3.11, so Harbor runs in a container of Debian trixie (python3.13):
# service/images/compose_v2.py's image, which holds Debian's docker CLI and Compose v2, with
# which Harbor drives the host's engine through the mounted socket. Its wheels are
# downloaded on the host by bench/_harbor.py: containers do not trust the proxy in front of
# the package index, so pip runs offline here, from its own wheel.
ARG BASE=examhall/compose-v2
FROM ${BASE}

RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends python3-venv \
 && rm -rf /var/lib/apt/lists/*

COPY wheels /tmp/wheels
RUN python3 -m venv --without-pip /opt/harbor \
 && /opt/harbor/bin/python "$(ls /tmp/wheels/pip-*.whl)/pip" install --no-index \
      --find-links /tmp/wheels --no-cache-dir --root-user-action=ignore harbor \
 && rm -rf /tmp/wheels \
 && docker compose version \
 && /opt/harbor/bin/harbor --version
ENV PATH=/opt/harbor/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
ENTRYPOINT ["harbor"]
