"""Matchers of values the agent produced: an exact value, a regular expression or a predicate.

Trace judges match tool-call arguments with them and structured judges match facts. Every
mismatch says why in a sentence, since that sentence becomes the judge's detail.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

# How much of a value the agent produced a detail quotes: the agent decides its size.
QUOTE_CHARS = 120


def quote(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= QUOTE_CHARS else text[:QUOTE_CHARS] + "...'"


@dataclass(frozen=True)
class Predicate:
    """A function of the value that says whether it matches, with a description for details."""

    fn: Callable[[Any], bool]
    description: str

    def __repr__(self) -> str:
        return self.description


def satisfies(fn: Callable[[Any], bool], description: str | None = None) -> Predicate:
    """A predicate matcher: `satisfies(lambda n: n > 3, "more than 3")`."""
    return Predicate(fn, description or str(getattr(fn, "__name__", "a predicate")))


def regex(pattern: str, flags: int = 0) -> re.Pattern[str]:
    """A matcher that searches text (`re.search`); anchor the pattern to match it whole."""
    return re.compile(pattern, flags)


def _is_function(value: Any) -> bool:
    # A class is callable too, but `expected=int` reads as a value, not a conversion.
    return callable(value) and not isinstance(value, type)


def describe(expected: Any) -> str:
    if isinstance(expected, re.Pattern):
        return f"text matching /{expected.pattern}/"
    if isinstance(expected, Predicate):
        return expected.description
    if _is_function(expected):
        return getattr(expected, "__name__", "a predicate")
    return quote(expected)


def mismatch(expected: Any, actual: Any) -> str | None:
    """None when `actual` matches `expected`, else why not.

    A predicate that raises on the agent's value does not match (the agent chose the value),
    and the detail names the exception."""
    differs = f"expected {describe(expected)}, got {quote(actual)}"
    if isinstance(expected, re.Pattern):
        if not isinstance(actual, str):
            return f"{differs} (not text)"
        return None if expected.search(actual) else differs
    if isinstance(expected, Predicate) or _is_function(expected):
        fn = expected.fn if isinstance(expected, Predicate) else expected
        try:
            ok = bool(fn(actual))
        except Exception as exc:
            return f"{differs} ({type(exc).__name__}: {exc})"
        return None if ok else differs
    # bool is an int in Python: True must not match 1.
    same = type(actual) is type(expected) or not (
        isinstance(actual, bool) or isinstance(expected, bool)
    )
    return None if same and actual == expected else differs
