"""When a request is sent again, and after how long.

Sent again: an HTTP 503 (the control plane said it cannot take the request now, so it did
not apply it) and a connection that could not be made (the request never left). A
connection lost after the request went out is sent again only for a request that is safe to
repeat (`Call.repeatable`: reads, a content-addressed upload, a cancel): a job submitted
again after its answer was lost would be a second job. The wait doubles from `first_s` up
to `longest_s`, unless the server's `Retry-After` names one, which is kept to (up to
`longest_s`)."""

from __future__ import annotations

import email.utils
import time
from dataclasses import dataclass

import httpx

# The control plane answers 503 when it cannot take a request now (a listing slot is busy,
# service/api/routes/jobs.py), with a Retry-After.
UNAVAILABLE = 503


@dataclass(frozen=True)
class Retry:
    """How often, and how patiently, a request is sent again. `attempts` counts the sends in
    all: 1 never sends again."""

    attempts: int = 5
    first_s: float = 0.5
    longest_s: float = 30.0

    def __post_init__(self) -> None:
        if self.attempts < 1 or self.first_s < 0 or self.longest_s < self.first_s:
            raise ValueError(
                f"Retry(attempts={self.attempts}, first_s={self.first_s}, "
                f"longest_s={self.longest_s}): attempts must be at least 1 and "
                "0 <= first_s <= longest_s."
            )

    def backoff(self, attempt: int) -> float:
        """The wait after the `attempt`-th send (1-based) failed, with no Retry-After."""
        return float(min(self.longest_s, self.first_s * 2 ** (attempt - 1)))

    def after_answer(self, attempt: int, response: httpx.Response) -> float | None:
        """The wait before sending again after this answer; None: the answer stands."""
        if response.status_code != UNAVAILABLE or attempt >= self.attempts:
            return None
        told = retry_after(response.headers.get("retry-after"))
        return self.backoff(attempt) if told is None else min(told, self.longest_s)

    def after_error(
        self, attempt: int, error: httpx.TransportError, repeatable: bool
    ) -> float | None:
        """The wait before sending again after a transport error; None: it is raised."""
        if attempt >= self.attempts:
            return None
        # Not connected (refused, unresolvable, timed out connecting): nothing was sent.
        unsent = isinstance(error, httpx.ConnectError | httpx.ConnectTimeout | httpx.PoolTimeout)
        return self.backoff(attempt) if unsent or repeatable else None


DEFAULT_RETRY = Retry()


def retry_after(value: str | None) -> float | None:
    """Retry-After's wait in seconds: a number of seconds or an HTTP date (RFC 9110 10.2.3);
    None when absent or unreadable."""
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())
