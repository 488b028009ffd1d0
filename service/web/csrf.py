"""Cross-site request refusal for everything a session cookie may change.

SameSite=Strict alone does not do it: "site" ignores the port, so a page served from
another port of the same host (another team's service, a job's artifact opened in a tab)
counts as same-site. A browser says where a request comes from in `Sec-Fetch-Site` and
`Origin`; a state-changing request whose either header names anything but this origin is
refused. A request with neither comes from no browser, which cannot carry a victim's cookie.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from starlette.requests import Request

# "none": the user's own action (a typed address, a bookmark), not another page's.
_ALLOWED_FETCH_SITES = ("same-origin", "none")


def cross_site_problem(request: Request, tls_proxy: bool = False) -> str | None:
    """Why this request must be refused as cross-site, or None when it may proceed.
    `tls_proxy`: the box is served over HTTPS by a proxy that reaches it over plain HTTP
    (EXAMHALL_COOKIE_SECURE), so its pages' origin is https whatever this request's scheme."""
    site = request.headers.get("sec-fetch-site")
    if site is not None and site.lower() not in _ALLOWED_FETCH_SITES:
        return f"The request came from another site or origin (Sec-Fetch-Site: {site})."
    origin = request.headers.get("origin")
    if origin is not None:
        host = request.headers.get("host", "")
        parts = urlsplit(origin) if origin != "null" else None
        # An origin is scheme, host and port: a plain-HTTP page on the same host and port
        # (a network attacker's, for one) is another origin than the HTTPS one.
        scheme = "https" if tls_proxy else request.url.scheme
        if parts is None or not parts.netloc or parts.netloc.lower() != host.lower():
            return f"The request came from another origin ({origin}), not {host}."
        if parts.scheme.lower() != scheme:
            return f"The request came from another origin ({origin}), not {scheme}://{host}."
    return None
