"""Removing a container, the one way every part of the Docker backend does it."""

from __future__ import annotations

import logging
import time
from typing import Any

import docker.errors

log = logging.getLogger(__name__)


def remove(container: Any) -> None:
    """Remove a container; never raises. One the engine refuses or does not answer about in
    time is logged and left to the reaper, which removes the labelled containers no running
    trial owns: a slow engine must not turn a trial already settled into an error."""
    for attempt in range(3):
        try:
            # v: an anonymous volume (none should exist) goes with its container.
            container.remove(force=True, v=True)
            return
        except docker.errors.NotFound:
            return
        except docker.errors.APIError as exc:  # e.g. a removal already under way: try again
            error: Exception = exc
            if attempt < 2:
                time.sleep(0.5)
        except Exception as exc:
            # A timeout already waited out the client's whole read timeout (60 s by
            # default): another attempt now would keep the trial waiting as long again.
            error = exc
            break
    log.warning(
        "container %s was not removed (%s: %s); left to the reaper",
        container.id,
        type(error).__name__,
        error,
    )
