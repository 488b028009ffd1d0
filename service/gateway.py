"""The model gateway: relays a trial's model requests to its provider with the box's key.

One gateway per trial. It refuses a request that would pass the trial's budget before
sending it, retries transient failures (429, 5xx, lost connections) with jittered backoff
bounded in count and time, and records every generation with its usage and cost.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import httpx

from sandbox.conversation import AssistantTurn, ModelRequest, ProviderError
from sandbox.faux import request_chars
from sandbox.protocol import Event, LifecycleEvent, Usage
from sandbox.providers import WIRE_FORMATS
from sandbox.providers.pricing import cost_usd
from sandbox.providers.wire import HttpResponse, ProviderHttpError
from sandbox.relay import ModelCallMessage, ModelReplyMessage, ReplyError
from service.providers import ProviderEntry


@dataclass(frozen=True)
class Budget:
    max_tokens: int | None = None
    max_cost_usd: float | None = None
    max_requests: int | None = None


@dataclass(frozen=True)
class RetryPolicy:
    attempts: int = 4
    base_s: float = 0.5
    cap_s: float = 8.0
    total_s: float = 60.0

    def delay(self, attempt: int, retry_after_s: float | None, rng: random.Random) -> float:
        # Full jitter (AWS): concurrent trials that hit one 429 do not retry in lockstep.
        backoff = rng.uniform(0, min(self.cap_s, self.base_s * 2**attempt))
        return max(backoff, retry_after_s or 0.0)


@dataclass
class GatewayUsage:
    usage: Usage = field(default_factory=Usage)
    cost_usd: float | None = None
    refused: int = 0


class TrialGateway:
    def __init__(
        self,
        entry: ProviderEntry,
        model_id: str,
        *,
        budget: Budget,
        http: httpx.Client,
        on_event: Callable[[Event], None] | None = None,
        retry: RetryPolicy = RetryPolicy(),
        sleep: Callable[[float], None] = time.sleep,
        rng: random.Random | None = None,
    ) -> None:
        self.entry = entry
        self.model_id = model_id
        self.budget = budget
        self.http = http
        self.on_event = on_event
        self.retry = retry
        self.sleep = sleep
        self.rng = rng or random.Random()
        self.spent = GatewayUsage()
        self.price = entry.prices.get(model_id)

    def __call__(self, call: ModelCallMessage) -> ModelReplyMessage:
        refusal = self._over_budget(call.request)
        if refusal is not None:
            self.spent.refused += 1
            self._event("budget", refusal)
            return ModelReplyMessage(id=call.id, error=ReplyError("limit_exceeded", refusal))
        started = time.monotonic()
        try:
            turn = self._send(call.request)
        except ProviderError as exc:
            self._event("generation_failed", str(exc))
            return ModelReplyMessage(id=call.id, error=ReplyError("provider_error", str(exc)))
        self.spent.usage = self.spent.usage + turn.usage
        cost = cost_usd(turn.usage, self.price)
        if cost is not None:
            self.spent.cost_usd = (self.spent.cost_usd or 0.0) + cost
        self._event(
            "generation",
            f"{self.entry.name}/{self.model_id} -> {turn.model or '?'}: "
            f"{turn.usage.input_tokens} in, {turn.usage.output_tokens} out, "
            f"cost {'unpriced' if cost is None else f'${cost:.6f}'}, "
            f"{time.monotonic() - started:.2f} s",
        )
        return ModelReplyMessage(id=call.id, turn=turn)

    def _event(self, step: str, detail: str) -> None:
        if self.on_event is not None:
            self.on_event(LifecycleEvent(step=step, detail=detail))

    def _over_budget(self, request: ModelRequest) -> str | None:
        """Why this request may not be sent, or None. Checked before sending, so no request
        ever goes out past a budget."""
        budget, spent = self.budget, self.spent
        if budget.max_requests is not None and spent.usage.requests >= budget.max_requests:
            return f"The trial used its budget of {budget.max_requests} model requests."
        if budget.max_tokens is not None:
            used = spent.usage.input_tokens + spent.usage.output_tokens
            estimate = math.ceil(request_chars(request) / 4)
            if used + estimate > budget.max_tokens:
                return (
                    f"The next model request (about {estimate} input tokens) would pass the "
                    f"trial's budget of {budget.max_tokens} tokens ({used} used)."
                )
        if budget.max_cost_usd is not None:
            if self.price is None:
                return (
                    f"The trial has a cost budget but {self.entry.name}/{self.model_id} has no "
                    "price in the providers file, so its cost cannot be kept."
                )
            if (spent.cost_usd or 0.0) >= budget.max_cost_usd:
                return f"The trial used its budget of ${budget.max_cost_usd:g}."
        return None

    def _send(self, request: ModelRequest) -> AssistantTurn:
        wire = WIRE_FORMATS[self.entry.kind]
        key = self.entry.key()
        if key is None:
            raise ProviderError(self.entry.key_problem() or "No key.")
        outgoing = wire.build_request(
            self.entry.base_url,
            self.model_id,
            request,
            api_key=key,
            headers=self.entry.headers,
            max_tokens=self.entry.max_tokens,
        )
        deadline = time.monotonic() + self.retry.total_s
        last: ProviderError | None = None
        for attempt in range(self.retry.attempts):
            try:
                response = self.http.request(
                    outgoing.method, outgoing.url, headers=outgoing.headers, content=outgoing.body
                )
                return wire.parse_response(
                    HttpResponse(response.status_code, dict(response.headers), response.content),
                    provider=self.entry.name,
                )
            except ProviderHttpError as exc:
                if not exc.retryable:
                    raise
                last, retry_after = exc, exc.retry_after_s
            except httpx.TransportError as exc:
                last = ProviderError(f"{self.entry.name}: connection failed: {exc}")
                retry_after = None
            pause = self.retry.delay(attempt, retry_after, self.rng)
            if attempt + 1 == self.retry.attempts or time.monotonic() + pause > deadline:
                break
            self.sleep(pause)
        raise ProviderError(
            f"{last} (gave up after {attempt + 1} attempt{'s' if attempt else ''})"
        ) from None
