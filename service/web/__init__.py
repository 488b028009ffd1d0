"""The web UI: server-rendered HTML pages over the same store and access rules as the API.

No JavaScript and no external assets: every page is one HTML document with inline CSS and
inline SVG, so it works offline and a strict Content-Security-Policy can forbid scripts.
"""
