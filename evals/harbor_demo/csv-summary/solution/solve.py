"""Paid orders' totals per customer, in euros, from the rates in rates.json beside this file."""

import csv
import json
import pathlib
import sys

rates = json.loads((pathlib.Path(__file__).parent / "rates.json").read_text())
totals: dict[str, float] = {}
with open(sys.argv[1], newline="") as orders:
    for row in csv.DictReader(orders):
        if row["status"] == "paid":
            euros = float(row["amount"]) * rates[row["currency"]]
            totals[row["customer"]] = totals.get(row["customer"], 0.0) + euros
summary = {customer: round(total, 2) for customer, total in sorted(totals.items())}
pathlib.Path(sys.argv[2]).write_text(json.dumps(summary, indent=2) + "\n")
