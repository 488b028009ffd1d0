"""Model providers' wire formats, as pure functions over plain HTTP data.

Each provider kind is a module with `build_request(base_url, model_id, request, *, api_key,
headers, max_tokens) -> HttpRequest` and `parse_response(response) -> AssistantTurn`;
`WIRE_FORMATS` maps a kind's name to it. Sending is left to the caller: the control plane's
relay uses httpx, the worker's direct mode urllib, so this package needs only the standard
library. Failures raise `ProviderHttpError`, which says whether a retry may help and how
long the provider asked us to wait.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from sandbox.conversation import AssistantTurn, ModelRequest
from sandbox.providers import anthropic, openai
from sandbox.providers.pricing import Price, cost_usd
from sandbox.providers.wire import (
    HttpRequest,
    HttpResponse,
    ProviderHttpError,
    classify,
    retry_after,
)


class WireFormat(Protocol):
    """What a provider kind's module offers; both modules satisfy it."""

    def build_request(
        self,
        base_url: str,
        model_id: str,
        request: ModelRequest,
        *,
        api_key: str | None,
        headers: Mapping[str, str] | None = None,
        max_tokens: int | None = None,
    ) -> HttpRequest: ...

    def parse_response(self, response: HttpResponse, *, provider: str = ...) -> AssistantTurn: ...


# Typed, so callers that pick a kind at run time keep the modules' signatures.
WIRE_FORMATS: Mapping[str, WireFormat] = {openai.KIND: openai, anthropic.KIND: anthropic}

__all__ = [
    "WIRE_FORMATS",
    "HttpRequest",
    "HttpResponse",
    "Price",
    "ProviderHttpError",
    "WireFormat",
    "anthropic",
    "classify",
    "cost_usd",
    "openai",
    "retry_after",
]
