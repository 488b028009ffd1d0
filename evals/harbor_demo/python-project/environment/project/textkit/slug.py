"""URL slugs from titles."""

import re
import unicodedata


def slugify(title: str, max_length: int = 40) -> str:
    """A lower-case slug of `title`: ASCII letters and digits, words joined by single
    hyphens, no hyphen at either end, at most `max_length` characters (cut at a word
    boundary when one is in reach)."""
    text = unicodedata.normalize("NFKD", title).encode("ascii", "ignore").decode()
    words = re.split(r"[^A-Za-z0-9]", text.lower())
    slug = "-".join(words)
    if len(slug) > max_length:
        slug = slug[:max_length]
    return slug
