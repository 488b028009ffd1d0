"""The case x round x variant grid: one cell per planned trial, coloured by its latest
attempt's outcome (or its status while it has none), linking to that attempt's page."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from service.web.markup import esc


class GridTrial(Protocol):
    """What a cell needs of a trial: a stored row or the API's GridTrial."""

    @property
    def id(self) -> str: ...
    @property
    def case_id(self) -> str: ...
    @property
    def variant(self) -> str: ...
    @property
    def round(self) -> int: ...
    @property
    def attempt(self) -> int: ...
    @property
    def status(self) -> str: ...
    @property
    def outcome(self) -> str | None: ...
    @property
    def error_kind(self) -> str | None: ...


# What a cell shows, in the legend's order. "missing" is a planned trial with no row: the
# job was cancelled before it ran.
STATES = {
    "passed": "P",
    "failed": "F",
    "error": "E",
    "running": "R",
    "queued": "Q",
    "missing": "-",
}


@dataclass(frozen=True)
class Cell:
    case: str
    variant: str
    round: int
    state: str
    trial: GridTrial | None


def cell_state(trial: GridTrial | None) -> str:
    if trial is None:
        return "missing"
    if trial.status == "finished" and trial.outcome:
        return trial.outcome
    return trial.status


def _cell(case: str, variant: str, round_: int, trial: GridTrial | None) -> Cell:
    return Cell(case, variant, round_, cell_state(trial), trial)


def build_cells(
    cases: Sequence[str], variants: Sequence[str], rounds: int, trials: Sequence[GridTrial]
) -> list[list[Cell]]:
    """Rows of cells: one row per case, columns variant-major then round."""
    latest: dict[tuple[str, str, int], GridTrial] = {}
    for trial in trials:
        key = (trial.case_id, trial.variant, trial.round)
        if key not in latest or trial.attempt > latest[key].attempt:
            latest[key] = trial
    return [
        [
            _cell(case, variant, r, latest.get((case, variant, r)))
            for variant in variants
            for r in range(1, rounds + 1)
        ]
        for case in cases
    ]


def _cell_html(cell: Cell) -> str:
    title = f"{cell.case} · {cell.variant} · round {cell.round}: {cell.state}"
    trial = cell.trial
    if trial is not None:
        if trial.error_kind:
            title += f" ({trial.error_kind})"
        if trial.attempt > 1:
            title += f", attempt {trial.attempt}"
    attrs = (
        f'class="cell {cell.state}" title="{esc(title)}" data-case="{esc(cell.case)}" '
        f'data-variant="{esc(cell.variant)}" data-round="{cell.round}" '
        f'data-outcome="{cell.state}"'
    )
    letter = STATES.get(cell.state, "?")
    if trial is None:
        return f"<td {attrs}><span>{letter}</span></td>"
    return (
        f'<td {attrs} data-trial="{esc(trial.id)}">'
        f'<a href="/ui/trials/{esc(trial.id)}">{letter}</a></td>'
    )


def legend() -> str:
    colours = {"missing": "var(--missing)"}
    items = "".join(
        f'<li style="--swatch: {colours.get(state, f"var(--{state})")}">{letter} {state}</li>'
        for state, letter in STATES.items()
    )
    return f'<ul class="legend">{items}</ul>'


def grid_table(
    cases: Sequence[str], variants: Sequence[str], rounds: int, trials: Sequence[GridTrial]
) -> str:
    rows = build_cells(cases, variants, rounds, trials)
    top = "".join(f'<th colspan="{rounds}">{esc(v)}</th>' for v in variants)
    second = "".join(f"<th>r{r}</th>" for _ in variants for r in range(1, rounds + 1))
    body = "".join(
        f'<tr><th class="case" scope="row">{esc(case)}</th>'
        + "".join(_cell_html(cell) for cell in row)
        + "</tr>"
        for case, row in zip(cases, rows, strict=True)
    )
    return (
        '<table class="grid"><thead>'
        f'<tr><th rowspan="2">case</th>{top}</tr><tr>{second}</tr>'
        f"</thead><tbody>{body}</tbody></table>{legend()}"
    )
