"""`/docs` over real HTTP: the API's reference, rendered by the control plane from its own
OpenAPI schema, loads nothing from elsewhere (FastAPI's Swagger UI loaded its script and CSS
from a CDN); `/openapi.json` stays, FastAPI's `/redoc` is gone. Every text from the schema is
escaped on the page."""

from __future__ import annotations

import html
import re

from markupsafe import escape

from service.web import api_docs
from service.web.templating import render
from tests.docker.conftest import Server

# Every URL the page points a browser at: src, href, action, and CSS url(...) or @import.
_REFERENCES = re.compile(r"""(?:src|href|action)\s*=\s*["']?([^"'\s>]+)|url\(([^)]*)\)|@import""")


def test_docs_lists_every_path_and_loads_nothing_from_elsewhere(server: Server) -> None:
    schema = server.http.get("/openapi.json").json()
    response = server.http.get("/docs", headers={"Authorization": ""})
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    page = response.text
    text = html.unescape(page)
    for path, item in schema["paths"].items():
        for method in item:
            assert f"{method.upper()} {path}" in text, (method, path)
    for name in schema["components"]["schemas"]:
        assert f'id="{api_docs.schema_anchor(name)}"' in page
    references = [m.group(1) or m.group(2) or "@import" for m in _REFERENCES.finditer(page)]
    assert references, "the page links its own operations and schemas"
    outside = [r for r in references if not r.startswith(("#", "/")) or r.startswith("//")]
    assert outside == []
    assert "//cdn" not in page
    assert "<script" not in page.lower()
    assert "default-src 'none'" in response.headers["content-security-policy"]


def test_fastapis_cdn_pages_are_gone(server: Server) -> None:
    assert server.http.get("/redoc").status_code == 404
    assert server.http.get("/docs/oauth2-redirect").status_code == 404


def test_the_schemas_text_is_escaped() -> None:
    hostile = '<script>alert(1)</script>"><img src=x>'
    schema = {
        "info": {"title": hostile, "version": "1", "description": hostile},
        "paths": {
            "/x/{" + hostile + "}": {
                "get": {
                    "summary": hostile,
                    "description": hostile,
                    "parameters": [{"name": hostile, "in": "query", "schema": {}}],
                    "responses": {"200": {"description": hostile}},
                }
            }
        },
        "components": {"schemas": {hostile: {"description": hostile, "properties": {hostile: {}}}}},
    }
    page = render(
        "api_docs.html",
        info=schema["info"],
        operations=api_docs.operations(schema),
        schemas=api_docs.schemas(api_docs.component_schemas(schema)),
        schema_anchor=api_docs.schema_anchor,
        who=None,
        refresh_s=None,
    )
    assert "<script" not in page and "<img" not in page
    assert str(escape(hostile)) in page
