"""Exit 0 when /app/query.sql, run on a database of the verifier's own (the same schema,
other rows, in memory), returns what the reference answer says. The query may only read:
an authorizer refuses ATTACH, writes and pragmas."""

import pathlib
import sqlite3
import sys

SCHEMA = pathlib.Path("/tests/schema.sql").read_text()
DATA = """
INSERT INTO customers VALUES (1, 'Eve', 'FR'), (2, 'Fay', 'UK'), (3, 'Gus', 'US'),
    (4, 'Hal', 'DE'), (5, 'Ida', 'UK');
INSERT INTO orders VALUES
    (1, 1, '2024-12-31', 'paid', 500), (2, 1, '2024-01-01', 'paid', 700),
    (3, 2, '2024-05-05', 'paid', 1200), (4, 3, '2025-01-01', 'paid', 9900),
    (5, 3, '2024-08-08', 'refunded', 4000), (6, 4, '2024-02-02', 'pending', 300),
    (7, 5, '2024-09-09', 'paid', 1500), (8, 3, '2023-06-06', 'paid', 50);
"""
# Ida 1500; Eve 500 + 700 and Fay 1200 tie; Gus's and Hal's orders are not paid ones of 2024.
EXPECTED = [("Ida", 1500), ("Eve", 1200), ("Fay", 1200)]
READS = {
    sqlite3.SQLITE_SELECT,
    sqlite3.SQLITE_READ,
    sqlite3.SQLITE_FUNCTION,
    sqlite3.SQLITE_RECURSIVE,
}


def only_reads(action: int, *_: object) -> int:
    return sqlite3.SQLITE_OK if action in READS else sqlite3.SQLITE_DENY


try:
    query = pathlib.Path("/app/query.sql").read_text()
except OSError as exc:
    sys.exit(f"FAIL: {exc}")
db = sqlite3.connect(":memory:")
db.executescript(SCHEMA + DATA)
db.set_authorizer(only_reads)
try:
    cursor = db.execute(query)
    rows = [tuple(row) for row in cursor.fetchall()]
    columns = [d[0] for d in cursor.description or []]
except (sqlite3.Error, ValueError) as exc:
    sys.exit(f"FAIL: the query does not run: {exc}")
if columns != ["name", "spent"]:
    sys.exit(f"FAIL: the columns are {columns}, expected ['name', 'spent']")
if rows != EXPECTED:
    sys.exit(f"FAIL: the query returned {rows}, expected {EXPECTED}"[:500])
print("PASS")
