"""The model gateway: relays a trial's model requests to its provider with the box's key.

One gateway per trial, in the control plane: keys never enter the container, and the usage
it records is authoritative. The retry loop and the budget are shared with direct mode
(sandbox/providers/client.py).
"""

from __future__ import annotations

import ssl
import time
from collections.abc import Callable

import certifi
import httpx

from sandbox.conversation import AssistantTurn, ModelRequest, ProviderError
from sandbox.protocol import Event, LifecycleEvent
from sandbox.providers import WIRE_FORMATS
from sandbox.providers.client import (
    DEFAULT_RETRY,
    Budget,
    RetryPolicy,
    Spending,
    send_with_retries,
)
from sandbox.providers.wire import HttpRequest, HttpResponse
from sandbox.relay import ModelCallMessage, ModelReplyMessage, ReplyError
from service.providers import ProviderEntry
from service.settings import Settings

__all__ = ["Budget", "TrialGateway"]


def provider_trust(settings: Settings) -> ssl.SSLContext | bool:
    """What the gateway's connections to providers trust: the usual roots (certifi's, as
    httpx has them), and EXAMHALL_CA_BUNDLE's authorities too when the operator gives one,
    as a TLS-inspecting proxy on the box's network needs."""
    if not settings.ca_bundle:
        return True
    context = ssl.create_default_context(cafile=certifi.where())
    context.load_verify_locations(cafile=settings.ca_bundle)
    return context


class TrialGateway:
    def __init__(
        self,
        entry: ProviderEntry,
        model_id: str,
        *,
        budget: Budget,
        http: httpx.Client,
        on_event: Callable[[Event], None] | None = None,
        retry: RetryPolicy = DEFAULT_RETRY,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.entry = entry
        self.model_id = model_id
        self.http = http
        self.on_event = on_event
        self.retry = retry
        self.sleep = sleep
        self.spent = Spending(budget, entry.prices.get(model_id), f"{entry.name}/{model_id}")

    def __call__(self, call: ModelCallMessage) -> ModelReplyMessage:
        refusal = self.spent.refusal(call.request)
        if refusal is not None:
            self.spent.refused += 1
            self._event("budget", refusal)
            return ModelReplyMessage(id=call.id, error=ReplyError("limit_exceeded", refusal))
        started = time.monotonic()
        try:
            turn = self.send(call.request)
        except ProviderError as exc:
            self._event("generation_failed", str(exc))
            return ModelReplyMessage(id=call.id, error=ReplyError("provider_error", str(exc)))
        cost = self.spent.record(turn)
        self._event(
            "generation",
            f"{self.spent.model} -> {turn.model or '?'}: "
            f"{turn.usage.input_tokens} in, {turn.usage.output_tokens} out, "
            f"cost {'unpriced' if cost is None else f'${cost:.6f}'}, "
            f"{time.monotonic() - started:.2f} s",
        )
        return ModelReplyMessage(id=call.id, turn=turn)

    def _event(self, step: str, detail: str) -> None:
        if self.on_event is not None:
            self.on_event(LifecycleEvent(step=step, detail=detail))

    def _post(self, request: HttpRequest) -> HttpResponse:
        response = self.http.request(
            request.method, request.url, headers=request.headers, content=request.body
        )
        return HttpResponse(response.status_code, dict(response.headers), response.content)

    def send(self, request: ModelRequest) -> AssistantTurn:
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
        return send_with_retries(
            self._post,
            outgoing,
            lambda response: wire.parse_response(response, provider=self.entry.name),
            provider=self.entry.name,
            transport_errors=(httpx.TransportError,),
            policy=self.retry,
            sleep=self.sleep,
        )
