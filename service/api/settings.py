"""The front door's settings: what one request may ask of the box, and how the UI's
sessions behave. They are fields of service.settings.Settings, read once, when the app is
made; `front_settings()` checks them together, as the front door always has.

Each has a default that a box can run with; a value that is not valid stops the control
plane at start with a message naming the variable, rather than failing some request later.
"""

from __future__ import annotations

from service.settings import FRONT_FIELDS, Settings, get_settings

# What the app's callers (and tests) pass as `settings=`: a Settings, whose other fields
# the app does not read from it.
FrontSettings = Settings

__all__ = ["FRONT_FIELDS", "FrontSettings", "front_settings"]


def front_settings() -> Settings:
    """The settings, once every front-door one is valid (else a ConfigError naming each
    bad one)."""
    return get_settings().checked(*FRONT_FIELDS)
