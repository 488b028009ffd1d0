"""Exit 0 when /app/merged.json is the expected merge (key order aside)."""

import json
import sys

EXPECTED = {
    "service": {"name": "ledger", "port": 8080, "debug": False},
    "database": {"host": "db.internal", "pool": {"min": 2, "max": 25}},
    "features": ["audit"],
    "log_level": "info",
    "region": "eu-west-1",
}
try:
    with open("/app/merged.json") as found:
        merged = json.load(found)
except (OSError, ValueError) as exc:
    sys.exit(f"FAIL: /app/merged.json cannot be read as JSON: {exc}")
if merged != EXPECTED:
    sys.exit(f"FAIL: /app/merged.json is {merged}, expected {EXPECTED}"[:600])
print("PASS")
