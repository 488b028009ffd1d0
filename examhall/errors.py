"""The library's exceptions: an answer of the control plane that is an error."""

from __future__ import annotations

import json
from typing import Any

import httpx


class ApiError(RuntimeError):
    """An answer of the control plane that is an error. `status` is its HTTP status,
    `problems` the server's detail, one problem a line; its text is the request, the status
    and those lines, as every `examhall` command prints it."""

    def __init__(self, request: str, status: int, problems: list[str]) -> None:
        self.request, self.status, self.problems = request, status, problems
        head = f"{request}: HTTP {status}"
        if len(problems) == 1:
            text = f"{head}: {problems[0]}"
        else:
            text = "\n".join([f"{head}:", *(f"  {line}" for line in problems)])
        super().__init__(text)


def detail_lines(detail: Any) -> list[str]:
    """The lines of an error body's `detail`: a string, or FastAPI's list of {loc, msg}
    (service/api/errors.py), whose messages may hold several lines (a suite's problems)."""
    if detail is None:
        return []
    if isinstance(detail, str):
        return [line for line in detail.splitlines() if line.strip()]
    if not isinstance(detail, list):
        return [json.dumps(detail)]
    lines: list[str] = []
    for item in detail:
        if not isinstance(item, dict) or "msg" not in item:
            lines.append(item if isinstance(item, str) else json.dumps(item))
            continue
        # "body" alone is the whole upload or job body: naming it says nothing.
        loc = [str(part) for part in item.get("loc") or []]
        where = ".".join(loc[1:] if loc[:1] == ["body"] else loc)
        first, *rest = [line for line in str(item["msg"]).splitlines() if line.strip()] or [""]
        lines.append(f"{where}: {first}" if where else first)
        lines.extend(rest)
    return lines


def raise_for_error(response: httpx.Response) -> None:
    """An ApiError for an answer of status 400 or more; nothing for any other."""
    if response.status_code < 400:
        return
    detail: Any
    if "html" in response.headers.get("content-type", ""):
        # A web page's error (the HTML report's) is a whole page: its status says enough.
        detail = None
    else:
        try:
            body = response.json()
            detail = body.get("detail") if isinstance(body, dict) else body
        except ValueError:
            detail = response.text
    raise ApiError(
        f"{response.request.method} {response.request.url.path}",
        response.status_code,
        detail_lines(detail) or [response.reason_phrase or "no detail"],
    )
