"""How the pages write numbers and times (registered as the templates' filters)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime


def pct(value: float | None, digits: int = 1) -> str:
    return "n/a" if value is None else f"{100 * value:.{digits}f}%"


def number(value: float, *, signed: bool = False) -> str:
    """A measurement for people: thousands grouped, small values to three figures."""
    sign = "+" if signed else ""
    if abs(value) >= 100:
        return f"{value:{sign},.0f}"
    return f"{value:{sign}.3g}"


def interval(ci: Sequence[float] | None) -> str:
    return "" if ci is None else f"[{100 * ci[0]:.1f}, {100 * ci[1]:.1f}]"


def when(value: datetime | None) -> str:
    return "" if value is None else value.strftime("%Y-%m-%d %H:%M:%S")
