"""A job's stream of server-sent events (service/api/stream.py), read a line at a time."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

# The stream's last event: the job finished or was cancelled, or the token was revoked.
END = "end"
# What a stream that closed before its `end` is taken for: a lost connection, made again.
ENDED_EARLY = "The job's stream closed before its end event."


@dataclass(frozen=True)
class StreamEvent:
    """One event of a job's stream: `event` is trial, build, counts, report or end, and
    `data` its JSON object (docs/reference/http-api.md)."""

    event: str
    data: dict[str, Any]


@dataclass
class EventReader:
    """Lines of a text/event-stream in, events out; comments (keepalives) are skipped."""

    event: str = "message"
    data: list[str] = field(default_factory=list)

    def feed(self, line: str) -> StreamEvent | None:
        """The event that this line ends, if it ends one."""
        if not line:
            done = StreamEvent(self.event, json.loads("\n".join(self.data))) if self.data else None
            self.event, self.data = "message", []
            return done
        if line.startswith(":"):
            return None
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "event":
            self.event = value
        elif name == "data":
            self.data.append(value)
        return None
