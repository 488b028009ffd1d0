"""URL slugs from titles."""

import re
import unicodedata


def slugify(title: str, max_length: int = 40) -> str:
    """A lower-case slug of `title`: ASCII letters and digits, words joined by single
    hyphens, no hyphen at either end, at most `max_length` characters (cut at a word
    boundary when one is in reach)."""
    text = unicodedata.normalize("NFKD", title).encode("ascii", "ignore").decode()
    words = [word for word in re.split(r"[^a-z0-9]+", text.lower()) if word]
    slug = "-".join(words)
    if len(slug) > max_length:
        cut = slug[: max_length + 1].rfind("-")
        slug = slug[:cut] if cut > 0 else slug[:max_length]
    return slug.strip("-")
