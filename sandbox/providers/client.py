"""Calling a provider: the retry loop and the budget, shared by the control plane's gateway
(relay mode, over httpx) and the worker (direct mode, over urllib).

Retries: 408/409/429/5xx and lost connections, with full-jitter exponential backoff (so
concurrent trials that hit one rate limit do not retry in lockstep) and any Retry-After the
provider asked for, bounded in attempts and in total time. What survives is a ProviderError
with the provider's own message. Budgets are checked before a request is sent, so no request
ever goes out past one.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from sandbox.conversation import AssistantTurn, ModelRequest, ProviderError
from sandbox.faux import request_chars
from sandbox.protocol import Usage
from sandbox.providers.pricing import Price, cost_usd
from sandbox.providers.wire import HttpRequest, HttpResponse, ProviderHttpError

Send = Callable[[HttpRequest], HttpResponse]


@dataclass(frozen=True)
class RetryPolicy:
    attempts: int = 4
    base_s: float = 0.5
    cap_s: float = 8.0
    total_s: float = 60.0

    def delay(self, attempt: int, retry_after_s: float | None, rng: random.Random) -> float:
        backoff = rng.uniform(0, min(self.cap_s, self.base_s * 2**attempt))
        return max(backoff, retry_after_s or 0.0)


DEFAULT_RETRY = RetryPolicy()


def send_with_retries(
    send: Send,
    request: HttpRequest,
    parse: Callable[[HttpResponse], AssistantTurn],
    *,
    provider: str,
    transport_errors: tuple[type[BaseException], ...],
    policy: RetryPolicy = DEFAULT_RETRY,
    sleep: Callable[[float], None] = time.sleep,
    rng: random.Random | None = None,
) -> AssistantTurn:
    rng = rng or random.Random()
    deadline = time.monotonic() + policy.total_s
    last: ProviderError | None = None
    attempt = 0
    for attempt in range(policy.attempts):
        try:
            return parse(send(request))
        except ProviderHttpError as exc:
            if not exc.retryable:
                raise
            last, retry_after = exc, exc.retry_after_s
        except transport_errors as exc:
            last, retry_after = ProviderError(f"{provider}: connection failed: {exc}"), None
        pause = policy.delay(attempt, retry_after, rng)
        if attempt + 1 == policy.attempts or time.monotonic() + pause > deadline:
            break
        sleep(pause)
    raise ProviderError(f"{last} (gave up after {attempt + 1} attempt{'s' if attempt else ''})")


@dataclass(frozen=True)
class Budget:
    max_tokens: int | None = None
    max_cost_usd: float | None = None
    max_requests: int | None = None

    @classmethod
    def from_limits(cls, limits: Mapping[str, object]) -> Budget:
        def number(name: str) -> float | None:
            value = limits.get(name)
            return float(value) if isinstance(value, int | float) else None

        tokens, requests = number("max_tokens"), number("max_requests")
        return cls(
            max_tokens=int(tokens) if tokens is not None else None,
            max_cost_usd=number("max_cost_usd"),
            max_requests=int(requests) if requests is not None else None,
        )


@dataclass
class Spending:
    """What a trial has spent, and refuses what would pass its budget."""

    budget: Budget
    price: Price | None
    model: str
    usage: Usage = field(default_factory=Usage)
    cost_usd: float | None = None
    refused: int = 0

    def refusal(self, request: ModelRequest) -> str | None:
        """Why this request may not be sent, or None."""
        budget, usage = self.budget, self.usage
        if budget.max_requests is not None and usage.requests >= budget.max_requests:
            return f"The trial used its budget of {budget.max_requests} model requests."
        if budget.max_tokens is not None:
            used = usage.input_tokens + usage.output_tokens
            estimate = math.ceil(request_chars(request) / 4)
            if used + estimate > budget.max_tokens:
                return (
                    f"The next model request (about {estimate} input tokens) would pass the "
                    f"trial's budget of {budget.max_tokens} tokens ({used} used)."
                )
        if budget.max_cost_usd is not None:
            if self.price is None:
                return (
                    f"The trial has a cost budget but {self.model} has no price in the "
                    "providers file, so its cost cannot be kept."
                )
            if (self.cost_usd or 0.0) >= budget.max_cost_usd:
                return f"The trial used its budget of ${budget.max_cost_usd:g}."
        return None

    def record(self, turn: AssistantTurn) -> float | None:
        """Add a generation's usage; returns its cost (None when unpriced)."""
        self.usage = self.usage + turn.usage
        cost = cost_usd(turn.usage, self.price)
        if cost is not None:
            self.cost_usd = (self.cost_usd or 0.0) + cost
        return cost
