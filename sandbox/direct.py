"""Direct mode (pi-evals parity): the worker calls the provider itself, with the key it holds
in memory. The container then needs an egress network, and the usage it reports is its own;
prefer the relay, which keeps the key out of the container and `--network none`."""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

from sandbox.conversation import AssistantTurn, ModelRequest
from sandbox.protocol import Event, LifecycleEvent
from sandbox.providers import WIRE_FORMATS
from sandbox.providers.client import Budget, Spending, send_with_retries
from sandbox.providers.pricing import Price
from sandbox.providers.wire import HttpRequest, HttpResponse
from sandbox.relay import BudgetExceeded

TIMEOUT_S = 120.0


def _post(request: HttpRequest) -> HttpResponse:
    outgoing = urllib.request.Request(
        request.url, data=request.body, headers=request.headers, method=request.method
    )
    # No proxies from the environment: the scrubbed environment has none, and a proxy would
    # see the key.
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(outgoing, timeout=TIMEOUT_S) as response:
            return HttpResponse(response.status, dict(response.headers), response.read())
    except urllib.error.HTTPError as exc:
        return HttpResponse(exc.code, dict(exc.headers or {}), exc.read())


class DirectModel:
    def __init__(
        self,
        name: str,
        model_id: str,
        settings: dict[str, Any],
        *,
        api_key: str | None,
        budget: Budget,
        emit: Callable[[Event], None],
    ) -> None:
        self.name = name
        self.model_id = model_id
        self.kind = str(settings["kind"])
        self.base_url = str(settings["base_url"])
        self.headers = {str(k): str(v) for k, v in (settings.get("headers") or {}).items()}
        self.max_tokens = settings.get("max_tokens")
        price = settings.get("price")
        self.provider = name.split("/", 1)[0]
        self._key = api_key
        self._emit = emit
        self.spent = Spending(budget, Price(**price) if price else None, name)

    def __repr__(self) -> str:  # never the key
        return f"DirectModel({self.name})"

    def complete(self, request: ModelRequest) -> AssistantTurn:
        refusal = self.spent.refusal(request)
        if refusal is not None:
            self._emit(LifecycleEvent(step="budget", detail=refusal))
            raise BudgetExceeded(refusal)
        wire = WIRE_FORMATS[self.kind]
        outgoing = wire.build_request(
            self.base_url,
            self.model_id,
            request,
            api_key=self._key,
            headers=self.headers,
            max_tokens=self.max_tokens,
        )
        turn = send_with_retries(
            _post,
            outgoing,
            lambda response: wire.parse_response(response, provider=self.provider),
            provider=self.provider,
            transport_errors=(OSError,),
        )
        cost = self.spent.record(turn)
        self._emit(
            LifecycleEvent(
                step="generation",
                detail=f"{self.name} -> {turn.model or '?'} (direct): "
                f"{turn.usage.input_tokens} in, {turn.usage.output_tokens} out, "
                f"cost {'unpriced' if cost is None else f'${cost:.6f}'}",
            )
        )
        return turn
