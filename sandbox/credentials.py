"""The environment scrub: no credential-looking or examhall-internal variable reaches a tool.

Keys themselves never enter the environment: in direct mode the supervisor holds them in its
memory (sandbox/supervisor.py)."""

from __future__ import annotations

import os
import re

# Names that look like they carry a secret, and the service's own variables.
_SECRET_NAME = re.compile(
    r"(KEY|TOKEN|SECRET|PASSW|CREDENTIAL|AUTH|COOKIE|SESSION|PRIVATE)", re.IGNORECASE
)
_INTERNAL_PREFIXES = ("EXAMHALL_", "DOCKER_")


def is_secret_name(name: str) -> bool:
    return bool(_SECRET_NAME.search(name)) or name.startswith(_INTERNAL_PREFIXES)


def scrub_environment(environ: dict[str, str] | os._Environ[str]) -> list[str]:
    """Remove credential-looking and internal variables in place; returns their names."""
    removed = sorted(name for name in environ if is_secret_name(name))
    for name in removed:
        del environ[name]
    return removed


# Where a task environment built above a trusting base keeps the operator's certificate
# authorities with the system's (service/environments/trust.py), and the variables that
# point tools which ship their own roots at them.
TRUST_BUNDLE = "/etc/ssl/examhall/ca-bundle.pem"
TRUST_VARIABLES = ("SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "PIP_CERT", "CURL_CA_BUNDLE")


def tool_environment(home: str) -> dict[str, str]:
    """The whole environment a tool subprocess gets: nothing inherited but the basics, and
    the box's certificate authorities where its image trusts them."""
    trust = dict.fromkeys(TRUST_VARIABLES, TRUST_BUNDLE) if os.path.isfile(TRUST_BUNDLE) else {}
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": home,
        "LANG": "C.UTF-8",
        "TERM": "dumb",
        "TMPDIR": "/tmp",
        "PYTHONDONTWRITEBYTECODE": "1",
        **trust,
    }
