"""Where a client connects, and as whom: what the sync and the async client both start from."""

from __future__ import annotations

from typing import Any, Generic, TypeVar

import httpx

from examhall.retry import DEFAULT_RETRY, Retry
from service.settings import get_settings
from service.settings import token as checked_token

TOKEN_ENV = "EXAMHALL_TOKEN"


def default_server() -> str:
    """$EXAMHALL_SERVER, else the settings' default (service/settings.py)."""
    return get_settings().server


def http_options(server: str | None, token: str | None, timeout: float) -> dict[str, Any]:
    """The httpx client's options: the base URL, the bearer token and the timeout. A token
    not given is $EXAMHALL_TOKEN's."""
    # Checked here, so a pasted token with a stray character is a clear error rather than
    # an encoding traceback from the HTTP library.
    if token:
        token = checked_token(token, "token")
    else:
        token = checked_token(get_settings().token, TOKEN_ENV)
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    # Redirects are answers here: the web UI's redirect to its login page is a refusal.
    return {
        "base_url": server or default_server(),
        "timeout": timeout,
        "headers": headers,
        "follow_redirects": False,
    }


H = TypeVar("H", httpx.Client, httpx.AsyncClient)


class Connected(Generic[H]):
    """A client's connection: its HTTP client of kind `http_kind` and its retry policy.
    `server` defaults to $EXAMHALL_SERVER and `token` to $EXAMHALL_TOKEN; `timeout` is each
    request's, in seconds."""

    http_kind: type[H]

    def __init__(
        self,
        server: str | None = None,
        token: str | None = None,
        *,
        timeout: float = 120.0,
        retry: Retry = DEFAULT_RETRY,
    ) -> None:
        self.http: H = self.http_kind(**http_options(server, token, timeout))
        self.retry = retry
