"""Caps on what the agent controls, so that no amount of it can stall the channel, fill the
store or crash a judge.

Each cap hit ends the trial as `limit_exceeded`, a failed run that names the cap in
`limits_hit`: an unscored outcome here would let an agent trade a failure for "no data".
"""

from __future__ import annotations

from dataclasses import dataclass

# What the report's limits_hit names for each cap.
EVENTS = "events"
EVENT_BYTES = "event_bytes"
TOOL_CALLS = "tool_calls"
TOOL_CALLS_PER_TURN = "tool_calls_per_turn"
JUDGE_READ = "judge_read_bytes"


class CapExceeded(Exception):
    """The agent produced more of something than its trial allows."""

    def __init__(self, cap: str, message: str) -> None:
        super().__init__(message)
        self.cap = cap
        self.message = message


@dataclass
class TranscriptCap:
    """Counts the events a trial emits and the bytes they take on the channel."""

    max_events: int
    max_bytes: int
    events: int = 0
    bytes: int = 0
    tripped: CapExceeded | None = None

    def admit(self, size: int) -> None:
        """Count one event of `size` bytes, or raise (and stay tripped) when it would pass
        a cap; the event that would pass it is not sent."""
        if self.tripped is not None:
            raise self.tripped
        if self.events + 1 > self.max_events:
            self.tripped = CapExceeded(
                EVENTS, f"The agent's transcript reached its cap of {self.max_events} events."
            )
        elif self.bytes + size > self.max_bytes:
            self.tripped = CapExceeded(
                EVENT_BYTES,
                f"The agent's transcript reached its cap of {self.max_bytes} bytes.",
            )
        if self.tripped is not None:
            raise self.tripped
        self.events += 1
        self.bytes += size
