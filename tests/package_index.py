"""A package index on loopback: PEP 503's simple API over a directory of wheels, so a test or
a benchmark can let a task pip-install through an egress policy without leaving the machine.

pip takes it as `--index-url http://ADDRESS:PORT/simple` (or PIP_INDEX_URL): an http index
on 127.0.0.0/8 is one pip trusts. Serve it on 127.0.0.2 rather than 127.0.0.1, which is in
the sandbox's no_proxy: a request for 127.0.0.1 would stay in the sandbox's own loopback
instead of going through the egress proxy to this one."""

from __future__ import annotations

import html
import http.server
import re
import threading
from pathlib import Path
from types import TracebackType


def normalized(name: str) -> str:
    """A project's name as PEP 503 compares it."""
    return re.sub(r"[-_.]+", "-", name).lower()


class PackageIndex(http.server.ThreadingHTTPServer):
    """Serves /simple/, /simple/<project>/ and /files/<wheel> from `wheels`; `paths` records
    every path asked for, in order."""

    def __init__(self, wheels: Path, address: str = "127.0.0.2") -> None:
        self.wheels = {p.name: p for p in sorted(wheels.glob("*.whl"))}
        self.paths: list[str] = []
        index = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                index.paths.append(self.path)
                found = index.page(self.path.split("?", 1)[0])
                if found is None:
                    self.send_error(404)
                    return
                body, kind = found
                self.send_response(200)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        super().__init__((address, 0), Handler)
        self.port: int = self.server_address[1]
        self.url = f"http://{address}:{self.port}/simple"
        self._thread = threading.Thread(target=self.serve_forever, daemon=True)
        self._thread.start()

    def projects(self) -> dict[str, list[str]]:
        """Normalized project name -> its wheels' file names."""
        found: dict[str, list[str]] = {}
        for name in self.wheels:
            found.setdefault(normalized(name.split("-", 1)[0]), []).append(name)
        return found

    def page(self, path: str) -> tuple[bytes, str] | None:
        projects = self.projects()
        if path in ("/simple", "/simple/"):
            links = "".join(f'<a href="{p}/">{p}</a>\n' for p in sorted(projects))
            return _html(links), "text/html"
        if matched := re.fullmatch(r"/simple/([^/]+)/?", path):
            wheels = projects.get(normalized(matched.group(1)))
            if wheels is None:
                return None
            links = "".join(
                f'<a href="/files/{html.escape(name)}">{html.escape(name)}</a>\n' for name in wheels
            )
            return _html(links), "text/html"
        if matched := re.fullmatch(r"/files/([^/]+)", path):
            wheel = self.wheels.get(matched.group(1))
            if wheel is not None:
                return wheel.read_bytes(), "application/octet-stream"
        return None

    def close(self) -> None:
        self.shutdown()
        self.server_close()

    def __enter__(self) -> PackageIndex:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


def _html(links: str) -> bytes:
    return f"<!DOCTYPE html>\n<html><body>\n{links}</body></html>\n".encode()


def point_at_index(task_dir: Path, url: str) -> None:
    """Make a copy of a task that pip-installs at test time (evals/harbor_demo's
    pytest-from-pypi) install from `url`: its verifier gets PIP_INDEX_URL, which pip reads."""
    toml = task_dir / "task.toml"
    toml.write_text(f'{toml.read_text()}\n[verifier.env]\nPIP_INDEX_URL = "{url}"\n')
