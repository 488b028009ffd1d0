"""Exit 0 when /app/reorder.json lists, sorted, the SKUs the service has below their reorder
level (asked of the service here, page by page)."""

import json
import sys
import time
import urllib.request

base = sys.argv[1]
for _ in range(100):
    try:
        urllib.request.urlopen(f"{base}/health", timeout=2).read()
        break
    except OSError:
        time.sleep(0.1)
else:
    print("the service did not start: a broken verifier, not a failed agent")
    sys.exit(2)
want, page = [], 1
while page is not None:
    body = json.load(urllib.request.urlopen(f"{base}/items?page={page}", timeout=5))
    want += [i["sku"] for i in body["items"] if i["stock"] < i["reorder_level"]]
    page = body["next"]
want.sort()
try:
    with open("/app/reorder.json") as f:
        found = json.load(f)
except (OSError, ValueError) as exc:
    sys.exit(f"FAIL: /app/reorder.json cannot be read as JSON: {exc}")
if found != want:
    sys.exit(f"FAIL: /app/reorder.json is {found!r}, expected {want}"[:500])
print("PASS")
