#!/bin/bash
# The reference solution: runs as the agent's unprivileged user, in /app, with no network.
set -euo pipefail
cat > /app/intervals.py <<'PY'
"""Closed integer intervals, as (start, end) pairs with start <= end."""


def merge(intervals: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The union of `intervals` as the fewest disjoint intervals, sorted. Intervals that
    overlap or touch (end + 1 == next start) become one."""
    merged: list[tuple[int, int]] = []
    for start, end in sorted(intervals):
        if merged and start <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged
PY
