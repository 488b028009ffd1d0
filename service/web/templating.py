"""The pages' Jinja2 environment: templates in service/web/templates/, every value escaped.

Autoescaping is on for every template, so whatever a suite, a model or an agent put into a
name, a case id, a transcript or a judge's detail reaches the page as text. Nothing is
marked safe: the chart's SVG is a template too, and the stylesheet is template source.
Undefined names raise rather than render as empty.
"""

from __future__ import annotations

from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined

from service.report.render_text import uncertainty_note
from service.web import formats

ENV = Environment(
    loader=PackageLoader("service.web", "templates"),
    autoescape=True,
    undefined=StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
    keep_trailing_newline=True,
)
ENV.filters.update(
    pct=formats.pct,
    number=formats.number,
    interval=formats.interval,
    when=formats.when,
    uncertainty=uncertainty_note,
)


def render(template: str, **context: Any) -> str:
    return ENV.get_template(template).render(**context)
