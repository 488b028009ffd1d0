"""How deeply nested a TOML or JSON document is, bounded before it can hurt.

Python's json and tomllib parsers recurse once per level of nesting, so an uploaded document
nested a few thousand deep raises RecursionError (not their decode errors), and one just under
the interpreter's limit parses into a value that recursion elsewhere (pydantic, json.dumps,
a SQL JSON column) can trip over later. Everything a team sends is held to MAX_DEPTH levels,
far beyond what a real task.toml or job body needs, and refused with a message naming the
document otherwise.
"""

from __future__ import annotations

import re
from typing import Any

# Levels of arrays and tables/objects one document may nest. A job body reaches about 5
# (service/domain/job_spec.py), a task.toml about 4 (service/suites/harbor/task_config.py).
MAX_DEPTH = 100

# A JSON string, as the unrolled loop (linear: no nested quantifier to backtrack over when
# the closing quote is missing). Quotes, backslashes and brackets are ASCII, and UTF-8 never
# uses an ASCII byte inside a multi-byte character, so the scan works on bytes.
_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_OPENS = frozenset(b"[{")
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")


class TooDeep(ValueError):
    """A document nested deeper than MAX_DEPTH; the message says which and what to do."""


def too_deep(what: str, limit: int = MAX_DEPTH) -> TooDeep:
    return TooDeep(
        f"{what} is nested more than {limit} levels deep (arrays and tables/objects within "
        "each other); flatten it"
    )


def json_depth_exceeds(data: bytes, limit: int = MAX_DEPTH) -> bool:
    """Whether a JSON text nests more than `limit` arrays/objects, decided without parsing it.

    Brackets inside strings do not count; an unterminated string's brackets do (the text is
    not JSON then, and is refused either way)."""
    # Few brackets cannot nest deeply: the usual body costs two counts.
    if data.count(b"[") + data.count(b"{") <= limit:
        return False
    brackets = _JSON_STRING.sub(b"", data).translate(None, _NOT_BRACKETS)
    depth = 0
    for byte in brackets:
        if byte in _OPENS:
            depth += 1
            if depth > limit:
                return True
        else:
            depth -= 1
    return False


def value_depth_exceeds(value: Any, limit: int = MAX_DEPTH) -> bool:
    """Whether a parsed value (dicts and lists) nests more than `limit` levels. Walked without
    recursion, so that measuring a deep value cannot itself raise RecursionError."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth + 1 > limit:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False
