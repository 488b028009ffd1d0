"""The pass-rate chart: inline SVG, one row per variant, a point and its 95% interval for
pass@1 and pass^k. A value the data cannot give is drawn as its reason, never as zero.

The geometry is worked out here; `templates/_chart.svg` writes it (escaped like any page)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from service.report.model import MetricView
from service.web.formats import interval, pct
from service.web.templating import render

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


class ChartVariant(Protocol):
    """What the chart reads of a variant: a report's VariantReport, or anything like it."""

    @property
    def name(self) -> str: ...
    @property
    def pass_at_1(self) -> MetricView: ...
    @property
    def pass_hat_k(self) -> MetricView: ...


@dataclass(frozen=True)
class Row:
    """One metric of one variant: a point with its interval, or the reason it has none."""

    metric: str
    label: str
    value: float | None
    ci: list[float] | None
    reason: str | None
    y: float
    colour: str

    @property
    def point_x(self) -> float:
        assert self.value is not None
        return _x(self.value)

    @property
    def low_x(self) -> float:
        assert self.ci is not None
        return _x(self.ci[0])

    @property
    def high_x(self) -> float:
        assert self.ci is not None
        return _x(self.ci[1])

    @property
    def right_of_point(self) -> bool:
        # The note goes on the emptier side of the point.
        return self.value is not None and self.value < 0.5

    @property
    def note_x(self) -> float:
        return self.point_x + (10 if self.right_of_point else -10)

    @property
    def note_anchor(self) -> str:
        return "start" if self.right_of_point else "end"

    @property
    def title(self) -> str:
        assert self.value is not None
        text = f"{self.label} {pct(self.value)}"
        if self.ci is not None:
            return f"{text} 95% CI {interval(self.ci)}"
        return f"{text} (no interval: {self.reason})"


@dataclass(frozen=True)
class Block:
    name: str
    shown: str  # the name, cut to fit
    label_y: float
    rows: list[Row]


@dataclass(frozen=True)
class Chart:
    height: int
    axis_y: int
    ticks: list[tuple[float, str]]
    legend: list[tuple[int, str, str]]
    blocks: list[Block]
    width: int = WIDTH
    left: int = LEFT
    right: int = LEFT + PLOT
    grid_top: int = TOP - 6


def _x(value: float) -> float:
    return round(LEFT + max(0.0, min(1.0, value)) * PLOT, 1)


def _label(metric: str, k: int) -> str:
    return "pass@1" if metric == "pass_at_1" else f"pass^{k}"


def chart(variants: Sequence[ChartVariant], k: int) -> Chart:
    """The chart of a report's `variants`; with k = 1 pass^k is pass@1 and is left out."""
    metrics = ["pass_at_1"] if k == 1 else ["pass_at_1", "pass_hat_k"]
    block = ROW * len(metrics) + GAP
    height = TOP + block * max(1, len(variants)) + BOTTOM
    blocks = []
    for index, variant in enumerate(variants):
        y0 = TOP + index * block
        name = variant.name
        rows = []
        for row, metric in enumerate(metrics):
            data: MetricView = getattr(variant, metric)
            rows.append(
                Row(
                    metric=metric,
                    label=_label(metric, k),
                    value=data.value,
                    ci=data.ci95,
                    reason=data.reason,
                    y=y0 + ROW * row + ROW / 2,
                    colour=COLOURS[metric],
                )
            )
        blocks.append(
            Block(
                name=name,
                shown=name if len(name) <= LABEL_CHARS else name[: LABEL_CHARS - 1] + "…",
                label_y=y0 + ROW * len(metrics) / 2 + 4,
                rows=rows,
            )
        )
    return Chart(
        height=height,
        axis_y=height - BOTTOM + 4,
        ticks=[(_x(tick / 100), f"{tick}%") for tick in range(0, 101, 25)],
        legend=[
            (LEFT + 200 * i, COLOURS[metric], _label(metric, k)) for i, metric in enumerate(metrics)
        ],
        blocks=blocks,
    )


def pass_rate_chart(variants: Sequence[ChartVariant], k: int) -> str:
    """The chart alone, as the job page includes it."""
    return render("_chart.svg", chart=chart(variants, k))
