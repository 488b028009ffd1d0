"""The inventory service: GET /health, and GET /items?page=N (JSON, 4 items a page, with the
next page's number or null), from a sqlite database made at start from seed.sql."""

import json
import pathlib
import sqlite3
import sys
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PAGE = 4
PORT = int(sys.argv[1]) if len(sys.argv) > 1 else 8765

db = sqlite3.connect(":memory:", check_same_thread=False)
db.executescript((pathlib.Path(__file__).parent / "seed.sql").read_text())


class Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        url = urllib.parse.urlsplit(self.path)
        if url.path == "/health":
            return self.reply(200, {"status": "ok"})
        if url.path != "/items":
            return self.reply(404, {"error": "no such path; try /items?page=1"})
        try:
            page = int(urllib.parse.parse_qs(url.query).get("page", ["1"])[0])
        except ValueError:
            return self.reply(400, {"error": "page must be a number"})
        rows = db.execute(
            "SELECT sku, name, stock, reorder_level FROM items ORDER BY sku LIMIT ? OFFSET ?",
            (PAGE + 1, (page - 1) * PAGE),
        ).fetchall()
        fields = ("sku", "name", "stock", "reorder_level")
        items = [dict(zip(fields, row, strict=True)) for row in rows[:PAGE]]
        self.reply(200, {"items": items, "next": page + 1 if len(rows) > PAGE else None})

    def reply(self, status: int, body: object) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


ThreadingHTTPServer(("127.0.0.1", PORT), Handler).serve_forever()
