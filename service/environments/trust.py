"""The operator's certificate authorities (EXAMHALL_CA_BUNDLE), layered onto every base image
a task environment's build names, so that its RUN steps, its trials' agent and its verifier
trust what a TLS-inspecting proxy on the box's network signs.

A base is replaced, in the Dockerfile the engine gets, by a layer above it built once per
(base, bundle) with no network: the bundle in /usr/local/share/ca-certificates (where
`update-ca-certificates` keeps finding it), appended to the system's bundle where the image
has one, a combined bundle at TRUST_BUNDLE, and the variables that tools which ship their own
roots (pip, requests, curl, git, node) read. The environment's content hash covers the layer's
id, so a new bundle builds the environments again.
"""

from __future__ import annotations

import json
from pathlib import Path

from sandbox.credentials import TRUST_BUNDLE
from service.images.capped_build import BuildLimits, BuildLog
from service.images.engine import ImageEngine
from service.images.sandbox_image import HASH_LABEL, BuildContext, fields_digest

# Where the combined bundle is, in every image built above a trusting base; the worker
# points the agent's tools at it (sandbox/credentials.py, which names the same path).
OPERATOR_CA = "/usr/local/share/ca-certificates/examhall-operator.crt"
_SYSTEM = "/etc/ssl/certs/ca-certificates.crt"
_SCRIPT = (
    f"mkdir -p {Path(TRUST_BUNDLE).parent} && "
    f"{{ cat {_SYSTEM} 2>/dev/null; cat {OPERATOR_CA}; }} > {TRUST_BUNDLE} && "
    f"if [ -f {_SYSTEM} ]; then cat {OPERATOR_CA} >> {_SYSTEM}; fi"
)
VARIABLES = {
    **dict.fromkeys(
        ("SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "PIP_CERT", "CURL_CA_BUNDLE", "GIT_SSL_CAINFO"),
        TRUST_BUNDLE,
    ),
    "NODE_EXTRA_CA_CERTS": OPERATOR_CA,
}
BUILD_TIMEOUT_S = 300.0


def trusting_base(
    engine: ImageEngine, image_id: str, bundle: bytes, *, repository: str, limits: BuildLimits
) -> str:
    """The id of `image_id` with `bundle` trusted, built unless it is already."""
    digest = fields_digest([("base", image_id.encode()), ("bundle", bundle)])
    ref = f"{repository}-trusting:{digest[:12]}"
    found = engine.image(ref)
    if found is not None and found.labels.get(HASH_LABEL) == digest:
        return found.id
    base = engine.image(image_id)
    user = str((base.config if base is not None else {}).get("User") or "")
    lines = [
        f"FROM {image_id}",
        "USER root",
        f"COPY examhall-ca.pem {OPERATOR_CA}",
        f"RUN {json.dumps(['/bin/sh', '-c', _SCRIPT])}",
        "ENV " + " ".join(f"{name}={value}" for name, value in VARIABLES.items()),
        *([f"USER {user}"] if user else []),
    ]
    context = BuildContext("\n".join(lines).encode() + b"\n", (("examhall-ca.pem", bundle),))
    return engine.build(
        context.tarball(),
        tag=ref,
        labels={HASH_LABEL: digest},
        limits=limits,
        timeout_s=BUILD_TIMEOUT_S,
        progress=lambda _: None,
        log=BuildLog(),
    )
