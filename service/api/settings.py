"""The front door's settings: what one request may ask of the box, and how the UI's
sessions behave. Read from EXAMHALL_* variables once, when the app is made.

Each has a default that a box can run with; a value that is not valid stops the control
plane at start with a message naming the variable, rather than failing some request later.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict, Field, ValidationError

PREFIX = "EXAMHALL_"


class FrontSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    # Listing an uploaded suite imports it in a container; an import is quick, so a slow
    # one is a hostile or broken suite and should not hold a container for long.
    list_timeout_s: float = Field(default=20.0, gt=0, le=600)
    # One job's plan: cases x variants x rounds. Every read of a job scans its trials.
    max_planned_trials: int = Field(default=5000, ge=1)
    max_variants: int = Field(default=8, ge=1)
    # A suite (1 MiB) and a docs bundle (1 MiB), JSON-escaped, fit with room to spare.
    max_body_bytes: int = Field(default=8 * 1024 * 1024, ge=1024)
    # Set behind a TLS-terminating proxy, where the control plane itself sees plain HTTP.
    cookie_secure: bool = False
    session_ttl_s: int = Field(default=12 * 3600, ge=60)
    # How often a live event stream checks that its caller's token is still valid.
    stream_recheck_s: float = Field(default=5.0, gt=0, le=300)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> FrontSettings:
        env = os.environ if env is None else env
        values = {
            name: env[PREFIX + name.upper()]
            for name in cls.model_fields
            if env.get(PREFIX + name.upper(), "").strip()
        }
        try:
            return cls.model_validate(values)
        except ValidationError as exc:
            problems = "; ".join(
                f"{PREFIX}{'.'.join(map(str, e['loc'])).upper()}: {e['msg']}" for e in exc.errors()
            )
            raise ValueError(f"Invalid setting: {problems}.") from None
