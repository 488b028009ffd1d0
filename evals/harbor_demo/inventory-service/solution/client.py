"""Wait for the service, read every page of /items, write the SKUs below their reorder level."""

import json
import sys
import time
import urllib.request

base, out = sys.argv[1], sys.argv[2]
for _ in range(100):
    try:
        urllib.request.urlopen(f"{base}/health", timeout=2).read()
        break
    except OSError:
        time.sleep(0.1)
skus, page = [], 1
while page is not None:
    body = json.load(urllib.request.urlopen(f"{base}/items?page={page}", timeout=5))
    skus += [i["sku"] for i in body["items"] if i["stock"] < i["reorder_level"]]
    page = body["next"]
with open(out, "w") as f:
    json.dump(sorted(skus), f)
