"""The sandbox backends this control plane can run trials on, by name.

Adding a backend is a folder under `service/backends/` with a `create(progress)` factory,
and one line here. Modules are imported only when their backend is chosen, so a box
without a backend's client library can still run the others.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import cast

from service.backends.base import SandboxBackend

Progress = Callable[[str], None]

BACKENDS: dict[str, str] = {
    "docker": "service.backends.docker",
    "swarm": "service.backends.swarm",
}


def create_backend(name: str, progress: Progress) -> SandboxBackend:
    """The backend called `name`, ready to start sandboxes (its image built or found)."""
    if name not in BACKENDS:
        raise ValueError(
            f"Unknown sandbox backend {name!r}; this build has: {', '.join(sorted(BACKENDS))}."
        )
    factory = importlib.import_module(BACKENDS[name]).create
    return cast(SandboxBackend, factory(progress))
