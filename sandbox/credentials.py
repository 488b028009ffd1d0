"""Model credentials held in the worker's memory only, and the environment scrub."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

# Names that look like they carry a secret, and the service's own variables.
_SECRET_NAME = re.compile(
    r"(KEY|TOKEN|SECRET|PASSW|CREDENTIAL|AUTH|COOKIE|SESSION|PRIVATE)", re.IGNORECASE
)
_INTERNAL_PREFIXES = ("EXAMHALL_", "DOCKER_")


class Credentials:
    """Keys for the model client. Never put into the environment or onto disk; `repr`
    hides the values so a traceback or log line cannot leak them."""

    def __init__(self, values: Mapping[str, str] | None) -> None:
        self._values = dict(values or {})

    def get(self, name: str) -> str | None:
        return self._values.get(name)

    def names(self) -> list[str]:
        return sorted(self._values)

    def __repr__(self) -> str:
        return f"Credentials(names={self.names()})"


def is_secret_name(name: str) -> bool:
    return bool(_SECRET_NAME.search(name)) or name.startswith(_INTERNAL_PREFIXES)


def scrub_environment(environ: dict[str, str] | os._Environ[str]) -> list[str]:
    """Remove credential-looking and internal variables in place; returns their names."""
    removed = sorted(name for name in environ if is_secret_name(name))
    for name in removed:
        del environ[name]
    return removed


def tool_environment(home: str) -> dict[str, str]:
    """The whole environment a tool subprocess gets: nothing inherited but the basics."""
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": home,
        "LANG": "C.UTF-8",
        "TERM": "dumb",
        "TMPDIR": "/tmp",
        "PYTHONDONTWRITEBYTECODE": "1",
    }
