"""HTTP as plain data, and what a provider's error answer means.

The provider modules turn a conversation into an `HttpRequest` and an `HttpResponse` into
an `AssistantTurn`; sending is the caller's business (httpx in the control plane's relay,
urllib in the worker's direct mode), so the wire format is written once and tested once.
"""

from __future__ import annotations

import email.utils
import json
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sandbox.conversation import ProviderError


@dataclass(frozen=True)
class HttpRequest:
    method: str
    url: str
    headers: dict[str, str]
    body: bytes


@dataclass(frozen=True)
class HttpResponse:
    status: int
    headers: dict[str, str]
    body: bytes

    def header(self, name: str) -> str | None:
        """A header by name in any case: senders differ in how they spell header names."""
        return header(self.headers, name)


def header(headers: Mapping[str, str], name: str) -> str | None:
    wanted = name.lower()
    for key, value in headers.items():
        if key.lower() == wanted:
            return value
    return None


class ProviderHttpError(ProviderError):
    """A provider's failure, with what a retry loop needs to decide what to do next.

    `message` is the provider's own words (from its JSON error body when it sent one);
    `str(error)` adds the provider and the status for logs and the trial's error message.
    `status` is None when no HTTP answer arrived (the sender's connection errors); a 2xx
    status means the answer arrived but could not be used.
    """

    def __init__(
        self,
        message: str,
        *,
        provider: str,
        status: int | None,
        retryable: bool,
        retry_after_s: float | None = None,
    ) -> None:
        self.message = message
        self.provider = provider
        self.status = status
        self.retryable = retryable
        self.retry_after_s = retry_after_s
        if status is not None and not 200 <= status < 300:
            super().__init__(f"{provider} HTTP {status}: {message}")
        else:
            # A 2xx whose body we cannot use: the status would only mislead.
            super().__init__(f"{provider}: {message}")

    def __reduce__(self) -> tuple[Any, ...]:
        # Keyword-only arguments defeat the default pickling of exceptions; keep errors
        # portable across processes and copy.copy.
        state = (self.message, self.provider, self.status, self.retryable, self.retry_after_s)
        return (_rebuild, state)


def _rebuild(
    message: str, provider: str, status: int | None, retryable: bool, retry_after_s: float | None
) -> ProviderHttpError:
    return ProviderHttpError(
        message,
        provider=provider,
        status=status,
        retryable=retryable,
        retry_after_s=retry_after_s,
    )


# The official OpenAI and Anthropic SDKs retry these (409 is a lock timeout there); 5xx
# includes Anthropic's 529 "overloaded". 400/401/403/404/422 will fail the same way again.
_RETRYABLE = frozenset({408, 409, 429})

# An error body that is not JSON (a proxy's HTML page) is quoted only this far.
_MAX_QUOTED = 300


def is_retryable_status(status: int) -> bool:
    return status in _RETRYABLE or 500 <= status <= 599


def error_message(body: bytes) -> str | None:
    """The provider's own error message from an error body, in the shapes servers use.

    OpenAI, llama.cpp and OpenRouter: {"error": {"message": ...}}; Anthropic:
    {"type": "error", "error": {"type", "message"}}; Ollama: {"error": "..."}; older
    vLLM: {"object": "error", "message": ...}; FastAPI-based servers: {"detail": ...}.
    """
    try:
        data = json.loads(body)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    error = data.get("error")
    if isinstance(error, dict):
        message = error.get("message")
        if isinstance(message, str) and message:
            return message
        if isinstance(error.get("type"), str):
            return str(error["type"])
    if isinstance(error, str) and error:
        return error
    for key in ("message", "detail"):
        value = data.get(key)
        if isinstance(value, str) and value:
            return value
    return None


def retry_after(headers: Mapping[str, str], *, now: float | None = None) -> float | None:
    """Seconds the provider asked us to wait, or None when it did not say.

    `retry-after-ms` (OpenAI) is finer than `Retry-After`, so it wins; Retry-After may be
    delta-seconds or an HTTP date (RFC 9110).
    """
    millis = header(headers, "retry-after-ms")
    if millis is not None:
        try:
            value = float(millis) / 1000
        except ValueError:
            pass
        else:
            if math.isfinite(value) and value >= 0:
                return value
    text = header(headers, "retry-after")
    if text is None:
        return None
    text = text.strip()
    try:
        seconds = float(text)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(text)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:
            return None
        return max(0.0, when.timestamp() - (time.time() if now is None else now))
    if not math.isfinite(seconds) or seconds < 0:
        return None
    return seconds


def classify(response: HttpResponse, *, provider: str = "provider") -> ProviderHttpError | None:
    """None for a 2xx answer; otherwise the error to raise, marked retryable or not."""
    if 200 <= response.status < 300:
        return None
    message = error_message(response.body)
    if message is None:
        text = response.body.decode("utf-8", errors="replace").strip()
        if len(text) > _MAX_QUOTED:
            text = text[:_MAX_QUOTED] + "..."
        message = text or "no error message in the response body"
    retryable = is_retryable_status(response.status)
    # Both official SDKs obey the server's explicit verdict over their status table.
    verdict = response.header("x-should-retry")
    if verdict == "true":
        retryable = True
    elif verdict == "false":
        retryable = False
    return ProviderHttpError(
        message,
        provider=provider,
        status=response.status,
        retryable=retryable,
        retry_after_s=retry_after(response.headers) if retryable else None,
    )


def decode_json(response: HttpResponse, *, provider: str) -> dict[str, Any]:
    """The JSON object of a 2xx answer; a non-2xx answer raises its classified error."""
    failure = classify(response, provider=provider)
    if failure is not None:
        raise failure
    try:
        data = json.loads(response.body)
    except ValueError as exc:
        raise malformed(provider, f"the response body is not JSON ({exc})", response) from None
    if not isinstance(data, dict):
        raise malformed(provider, "the response body is not a JSON object", response)
    if data.get("type") == "error" or data.get("error"):
        # Some gateways (OpenRouter) answer 200 with an error object when an upstream
        # fails after the request was accepted; its code, when numeric, says if a retry may
        # help.
        error = data.get("error")
        code = error.get("code") if isinstance(error, dict) else None
        status = code if isinstance(code, int) and not isinstance(code, bool) else None
        raise ProviderHttpError(
            error_message(response.body) or "the provider answered with an error",
            provider=provider,
            status=response.status,
            retryable=status is not None and is_retryable_status(status),
        )
    return data


def malformed(provider: str, what: str, response: HttpResponse) -> ProviderHttpError:
    """A 2xx answer we cannot use; asking again is no more likely to help."""
    return ProviderHttpError(what, provider=provider, status=response.status, retryable=False)


def encode_json(payload: Mapping[str, Any]) -> bytes:
    """A request body; total, since the conversation carries the agent's text: a lone
    surrogate (a file name that is not UTF-8) goes as a JSON escape instead of raising."""
    text = json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(payload, separators=(",", ":")).encode("ascii")
