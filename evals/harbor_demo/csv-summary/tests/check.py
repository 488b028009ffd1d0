"""Exit 0 when /app/summary.json holds the expected totals (to the cent) in key order."""

import json
import sys

# acme 120 + 80.50 * 1.17; globex 250 * 0.92 + 15.25 + 64.10 * 1.17; initech 300 * 1.17 + 18.
EXPECTED = {"acme": 214.19, "globex": 320.25, "initech": 369.0, "umbrella": 0.99}

try:
    with open("/app/summary.json") as found:
        summary = json.load(found)
except (OSError, ValueError) as exc:
    sys.exit(f"FAIL: /app/summary.json cannot be read as JSON: {exc}")
if not isinstance(summary, dict):
    sys.exit(f"FAIL: /app/summary.json is not an object: {summary!r}"[:300])
if list(summary) != sorted(summary):
    sys.exit(f"FAIL: the keys are not sorted: {list(summary)}")
if summary.keys() != EXPECTED.keys() or any(
    not isinstance(summary[k], (int, float)) or abs(summary[k] - v) > 0.005
    for k, v in EXPECTED.items()
):
    sys.exit(f"FAIL: /app/summary.json is {summary}, expected {EXPECTED}"[:500])
print("PASS")
