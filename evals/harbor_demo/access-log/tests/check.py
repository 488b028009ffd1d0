"""Exit 0 when /app/top_errors.txt names the three clients with the most 5xx responses in the
shipped log (counted when the task was written: the agent could rewrite /app/access.log)."""

import pathlib
import sys

WANT = ["10.0.0.17 7", "10.0.0.9 5", "172.16.4.2 5"]
try:
    got = pathlib.Path("/app/top_errors.txt").read_text().rstrip("\n").split("\n")
except OSError as exc:
    sys.exit(f"FAIL: {exc}")
if got != WANT:
    sys.exit(f"FAIL: /app/top_errors.txt is {got}, expected {WANT}"[:500])
print("PASS")
