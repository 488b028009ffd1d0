"""HTML building blocks: escaping, number formats and the page layout.

Suite names, case ids, transcripts and judge details come from uploaded suites and from
models, so they are untrusted: every value goes through `esc` before it meets markup.
"""

from __future__ import annotations

import html
from collections.abc import Iterable

CSS = """
:root { --passed: #2e7d32; --failed: #c62828; --error: #ef6c00; --queued: #9e9e9e;
  --running: #1565c0; --missing: #eeeeee; --ink: #1b1b1b; --muted: #666; --line: #ddd; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--ink);
  margin: 0; background: #fafafa; }
header.top { display: flex; gap: 1rem; align-items: center; padding: .6rem 1.2rem;
  background: #263238; color: #fff; }
header.top a { color: #fff; text-decoration: none; font-weight: 600; }
header.top .who { margin-left: auto; color: #cfd8dc; }
header.top form { margin: 0; }
main { padding: 1rem 1.2rem 3rem; max-width: 1200px; }
h1 { font-size: 1.35rem; margin: .2rem 0 .8rem; word-break: break-all; }
h2 { font-size: 1.1rem; margin: 1.6rem 0 .5rem; }
h3 { font-size: 1rem; margin: 1rem 0 .4rem; }
table { border-collapse: collapse; background: #fff; }
th, td { border: 1px solid var(--line); padding: .3rem .55rem; text-align: left;
  vertical-align: top; }
th { background: #f0f0f0; font-weight: 600; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
dl.meta { display: grid; grid-template-columns: max-content 1fr; gap: .15rem 1rem; margin: 0;
  background: #fff; border: 1px solid var(--line); padding: .6rem .8rem; }
dl.meta dt { color: var(--muted); }
dl.meta dd { margin: 0; word-break: break-all; }
.muted { color: var(--muted); }
.badge { display: inline-block; padding: 0 .45rem; border-radius: .6rem; color: #fff;
  font-size: .85em; background: var(--queued); }
.badge.passed, .badge.finished { background: var(--passed); }
.badge.failed, .badge.cancelled { background: var(--failed); }
.badge.error { background: var(--error); }
.badge.running { background: var(--running); }
.flag { display: inline-block; padding: 0 .45rem; margin-right: .3rem; border-radius: .3rem;
  background: #fff3e0; border: 1px solid #ffb74d; }
.notice { background: #fff8e1; border: 1px solid #ffe082; padding: .5rem .8rem; }
.error-text { color: var(--failed); }
table.grid td.cell { padding: 0; width: 2.2rem; height: 1.8rem; text-align: center; }
table.grid td.cell a, table.grid td.cell span { display: block; line-height: 1.8rem;
  color: #fff; text-decoration: none; font-weight: 700; }
td.cell.passed { background: var(--passed); }
td.cell.failed { background: var(--failed); }
td.cell.error { background: var(--error); }
td.cell.queued { background: var(--queued); }
td.cell.running { background: var(--running); }
td.cell.missing { background: var(--missing); }
td.cell.missing span { color: var(--muted); }
table.grid th.case { max-width: 22rem; word-break: break-all; font-weight: 400; }
ul.legend { list-style: none; padding: 0; display: flex; gap: 1rem; flex-wrap: wrap; }
ul.legend li::before { content: ""; display: inline-block; width: .9rem; height: .9rem;
  margin-right: .3rem; vertical-align: -2px; background: var(--swatch); }
ol.transcript { list-style: none; padding: 0; margin: 0; }
ol.transcript > li { background: #fff; border: 1px solid var(--line);
  border-left: 4px solid var(--queued); margin: .4rem 0; padding: .4rem .7rem; }
ol.transcript > li.role-user { border-left-color: #6a1b9a; }
ol.transcript > li.role-assistant { border-left-color: var(--running); }
ol.transcript > li.tool_call { border-left-color: var(--error); }
ol.transcript > li.tool_result { border-left-color: var(--passed); }
ol.transcript > li.tool_result.failed { border-left-color: var(--failed); }
ol.transcript > li.lifecycle { color: var(--muted); padding: .15rem .7rem; }
.kind { font-weight: 700; margin-right: .4rem; }
pre { white-space: pre-wrap; word-break: break-word; margin: .3rem 0; background: #f6f8fa;
  padding: .4rem .6rem; max-height: 30rem; overflow: auto; }
form.login { background: #fff; border: 1px solid var(--line); padding: 1rem; max-width: 28rem; }
form.login input[type=password] { width: 100%; padding: .4rem; margin: .3rem 0 .8rem; }
button { padding: .3rem .8rem; cursor: pointer; }
svg.chart { background: #fff; border: 1px solid var(--line); }
svg.chart text { font: 12px system-ui, sans-serif; fill: var(--ink); }
svg.chart .axis { stroke: #bbb; }
svg.chart .gridline { stroke: #eee; }
"""


def esc(value: object) -> str:
    """Text (or an attribute value in double quotes) safe to put in HTML or inline SVG."""
    return html.escape(str(value), quote=True)


def pct(value: float | None, digits: int = 1) -> str:
    return "n/a" if value is None else f"{100 * value:.{digits}f}%"


def number(value: float, *, signed: bool = False) -> str:
    """A measurement for people: thousands grouped, small values to three figures."""
    sign = "+" if signed else ""
    if abs(value) >= 100:
        return f"{value:{sign},.0f}"
    return f"{value:{sign}.3g}"


def interval(ci: list[float] | None) -> str:
    return "" if ci is None else f"[{100 * ci[0]:.1f}, {100 * ci[1]:.1f}]"


def table(headers: Iterable[str], rows: Iterable[Iterable[str]], cls: str = "") -> str:
    """A table of text headers and rows of markup cells (callers escape what they put in)."""
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(row) + "</tr>" for row in rows)
    attr = f' class="{esc(cls)}"' if cls else ""
    return f"<table{attr}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def td(text: object, cls: str = "") -> str:
    attr = f' class="{esc(cls)}"' if cls else ""
    return f"<td{attr}>{esc(text)}</td>"


def meta_list(items: Iterable[tuple[str, str]]) -> str:
    """A definition list of label -> markup."""
    return (
        '<dl class="meta">'
        + "".join(f"<dt>{esc(label)}</dt><dd>{value}</dd>" for label, value in items)
        + "</dl>"
    )


def layout(title: str, body: str, *, who: str | None = None, refresh_s: int | None = None) -> str:
    """A whole page. `body` is markup; `title` and `who` are text."""
    # The page reloads itself while a job runs, so it needs no script to stay current.
    refresh = f'<meta http-equiv="refresh" content="{refresh_s}">' if refresh_s else ""
    account = ""
    if who is not None:
        account = (
            f'<span class="who">signed in as {esc(who)}</span>'
            '<form method="post" action="/ui/logout"><button type="submit">Sign out</button>'
            "</form>"
        )
    return (
        "<!doctype html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"{refresh}<title>{esc(title)} · examhall</title><style>{CSS}</style></head>"
        f'<body><header class="top"><a href="/ui/jobs">examhall</a>{account}</header>'
        f"<main>{body}</main></body></html>\n"
    )
