"""What a model turn cost, from a provider's price table."""

from __future__ import annotations

from dataclasses import dataclass

from sandbox.protocol import Usage

_PER = 1_000_000


@dataclass(frozen=True)
class Price:
    """Dollars per million tokens."""

    input: float
    output: float
    cache_read: float = 0
    cache_write: float = 0


def cost_usd(usage: Usage, price: Price | None) -> float | None:
    """The cost in dollars, or None for an unpriced model: unknown, which is not free."""
    if price is None:
        return None
    # Usage.input_tokens counts the cached tokens too; each part is charged once, at its rate.
    uncached = max(0, usage.input_tokens - usage.cache_read_tokens - usage.cache_write_tokens)
    return (
        uncached * price.input
        + usage.cache_read_tokens * price.cache_read
        + usage.cache_write_tokens * price.cache_write
        + usage.output_tokens * price.output
    ) / _PER
