#!/bin/bash
# The reference solution: runs as the agent's unprivileged user, in /app, with no network.
set -euo pipefail
python3 - <<'PY'
import json


def merge(base, override):
    merged = dict(base)
    for key, value in override.items():
        if value is None:
            merged.pop(key, None)
        elif isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = merge(merged[key], value)
        else:
            merged[key] = value
    return merged


with open("/app/base.json") as base, open("/app/override.json") as override:
    result = merge(json.load(base), json.load(override))
with open("/app/merged.json", "w") as out:
    json.dump(result, out, indent=2)
PY
