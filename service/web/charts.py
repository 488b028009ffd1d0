"""The pass-rate chart: inline SVG, one row per variant, a point and its 95% interval for
pass@1 and pass^k. A value the data cannot give is drawn as its reason, never as zero."""

from __future__ import annotations

from typing import Any

from service.web.markup import esc, interval, pct

WIDTH = 760
LEFT = 180  # variant names
RIGHT = 24
TOP = 34  # legend
BOTTOM = 30  # axis labels
ROW = 22
GAP = 12
PLOT = WIDTH - LEFT - RIGHT
COLOURS = {"pass_at_1": "#1565c0", "pass_hat_k": "#ef6c00"}
LABEL_CHARS = 26


def _x(value: float) -> float:
    return round(LEFT + max(0.0, min(1.0, value)) * PLOT, 1)


def _label(metric: str, k: int) -> str:
    return "pass@1" if metric == "pass_at_1" else f"pass^{k}"


def _metric_row(variant: str, metric: str, data: dict[str, Any], k: int, y: float) -> str:
    value, ci, reason = data["value"], data["ci95"], data["reason"]
    colour = COLOURS[metric]
    label = _label(metric, k)
    attrs = f'class="metric {metric}" data-variant="{esc(variant)}" data-metric="{metric}"'
    if value is None:
        # Nothing to plot: the reason stands where the point would be.
        return (
            f'<g {attrs} data-value=""><title>{esc(f"{variant} {label}: n/a ({reason})")}</title>'
            f'<text class="reason" x="{LEFT + 6}" y="{y + 4}">'
            f"{esc(label)} n/a: {esc(reason)}</text>"
            "</g>"
        )
    title = f"{variant} {label} {pct(value)}"
    parts = []
    if ci is not None:
        low, high = _x(ci[0]), _x(ci[1])
        title += f" 95% CI {interval(ci)}"
        attrs += f' data-low="{ci[0]}" data-high="{ci[1]}"'
        parts += [
            f'<line class="interval" x1="{low}" x2="{high}" y1="{y}" y2="{y}" '
            f'stroke="{colour}" stroke-width="3"/>',
            *(
                f'<line class="cap" x1="{x}" x2="{x}" y1="{y - 5}" y2="{y + 5}" '
                f'stroke="{colour}" stroke-width="2"/>'
                for x in (low, high)
            ),
        ]
    point = _x(value)
    parts.append(f'<circle class="point" cx="{point}" cy="{y}" r="5" fill="{colour}"/>')
    if ci is None:
        title += f" (no interval: {reason})"
        # On the emptier side of the point, so the note does not run off the chart.
        right = value < 0.5
        anchor, dx = ("start", 10) if right else ("end", -10)
        parts.append(
            f'<text class="reason" x="{point + dx}" y="{y + 4}" text-anchor="{anchor}">'
            f"no interval: {esc(reason)}</text>"
        )
    return f'<g {attrs} data-value="{value}"><title>{esc(title)}</title>{"".join(parts)}</g>'


def pass_rate_chart(variants: list[dict[str, Any]], k: int) -> str:
    """The chart for a report's `variants`; with k = 1 pass^k is pass@1 and is left out."""
    metrics = ["pass_at_1"] if k == 1 else ["pass_at_1", "pass_hat_k"]
    block = ROW * len(metrics) + GAP
    height = TOP + block * max(1, len(variants)) + BOTTOM
    axis_y = height - BOTTOM + 4
    out = [
        f'<svg class="chart" xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" '
        f'height="{height}" viewBox="0 0 {WIDTH} {height}" role="img" '
        'aria-label="Pass rates with 95% intervals">'
    ]
    for tick in range(0, 101, 25):
        x = _x(tick / 100)
        out.append(
            f'<line class="gridline" x1="{x}" x2="{x}" y1="{TOP - 6}" y2="{axis_y}"/>'
            f'<text x="{x}" y="{axis_y + 16}" text-anchor="middle">{tick}%</text>'
        )
    out.append(f'<line class="axis" x1="{LEFT}" x2="{LEFT + PLOT}" y1="{axis_y}" y2="{axis_y}"/>')
    legend_x = LEFT
    for metric in metrics:
        out.append(
            f'<circle cx="{legend_x + 5}" cy="14" r="5" fill="{COLOURS[metric]}"/>'
            f'<text x="{legend_x + 14}" y="18">{esc(_label(metric, k))} with 95% interval</text>'
        )
        legend_x += 200
    for index, variant in enumerate(variants):
        y0 = TOP + index * block
        name = variant["name"]
        shown = name if len(name) <= LABEL_CHARS else name[: LABEL_CHARS - 1] + "…"
        out.append(
            f'<text class="variant" x="{LEFT - 10}" y="{y0 + ROW * len(metrics) / 2 + 4}" '
            f'text-anchor="end"><title>{esc(name)}</title>{esc(shown)}</text>'
        )
        for row, metric in enumerate(metrics):
            out.append(_metric_row(name, metric, variant[metric], k, y0 + ROW * row + ROW / 2))
    out.append("</svg>")
    return "".join(out)
