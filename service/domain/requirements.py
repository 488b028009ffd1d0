"""Pinned pip requirements: what an environment or an agent installs must not change with a
new release, so every requirement names its version."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator

_PIN = re.compile(
    r"^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?(\[[A-Za-z0-9._,-]+\])?==[A-Za-z0-9.!+_-]+$"
)


def _pinned(requirement: str) -> str:
    if not _PIN.match(requirement.strip()):
        raise ValueError(
            f"{requirement!r} is not a pinned requirement; write NAME==VERSION (such as "
            f"requests==2.32.3), so that a new release cannot change an eval quietly"
        )
    return requirement.strip()


PinnedRequirement = Annotated[str, AfterValidator(_pinned)]
