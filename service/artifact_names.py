"""Which artifact names may be stored, listed and served.

A name is one plain file name: it ends up in a URL path segment and in a download's
Content-Disposition, so one with a separator, a NUL or control character, or a dot-name
could be listed but never fetched, or read as a path by whatever saves it. Such a name is
never stored; the listing and the download apply the same rule, so they always agree.
"""

from __future__ import annotations

import unicodedata
from urllib.parse import quote

# artifacts.name is VARCHAR(200).
MAX_NAME_CHARS = 200


def artifact_name_problem(name: str) -> str | None:
    """Why `name` is not a valid artifact name, or None when it is."""
    if not name or len(name) > MAX_NAME_CHARS:
        return f"an artifact name must be 1 to {MAX_NAME_CHARS} characters"
    if name in (".", "..") or ".." in name:
        return f"artifact name {name!r} contains '..'"
    if "/" in name or "\\" in name:
        return f"artifact name {name!r} contains a path separator"
    if any(unicodedata.category(char) in ("Cc", "Cs", "Zl", "Zp") for char in name):
        return f"artifact name {name!r} contains a control character"
    return None


def content_disposition(name: str) -> str:
    """An attachment header for a valid name: an ASCII fallback and the exact UTF-8 name."""
    fallback = "".join(c if c.isascii() and c not in '"%;' else "_" for c in name)
    return f"attachment; filename=\"{fallback}\"; filename*=UTF-8''{quote(name, safe='')}"
