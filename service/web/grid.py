"""The case x round x variant grid: one cell per planned trial, coloured by its latest
attempt's outcome (or its status while it has none), linking to that attempt's page.
`templates/_grid.html` draws it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from service.domain.status import Outcome, TrialStatus
from service.web.templating import render


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
STATES: dict[str, str] = {
    Outcome.PASSED: "P",
    Outcome.FAILED: "F",
    Outcome.ERROR: "E",
    TrialStatus.RUNNING: "R",
    TrialStatus.QUEUED: "Q",
    "missing": "-",
}


@dataclass(frozen=True)
class Cell:
    case: str
    variant: str
    round: int
    state: str
    trial: GridTrial | None

    @property
    def letter(self) -> str:
        return STATES.get(self.state, "?")

    @property
    def title(self) -> str:
        title = f"{self.case} · {self.variant} · round {self.round}: {self.state}"
        if self.trial is not None:
            if self.trial.error_kind:
                title += f" ({self.trial.error_kind})"
            if self.trial.attempt > 1:
                title += f", attempt {self.trial.attempt}"
        return title


def cell_state(trial: GridTrial | None) -> str:
    if trial is None:
        return "missing"
    if trial.status == TrialStatus.FINISHED and trial.outcome:
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


@dataclass(frozen=True)
class Grid:
    """The grid as `templates/_grid.html` draws it."""

    variants: Sequence[str]
    rounds: int
    rows: list[tuple[str, list[Cell]]]  # (case, its cells)
    legend: list[tuple[str, str, str]]  # (state, letter, colour)


def _legend() -> list[tuple[str, str, str]]:
    colours = {"missing": "var(--missing)"}
    return [
        (state, letter, colours.get(state, f"var(--{state})")) for state, letter in STATES.items()
    ]


def grid(
    cases: Sequence[str], variants: Sequence[str], rounds: int, trials: Sequence[GridTrial]
) -> Grid:
    rows = build_cells(cases, variants, rounds, trials)
    return Grid(variants, rounds, list(zip(cases, rows, strict=True)), _legend())


def grid_table(
    cases: Sequence[str], variants: Sequence[str], rounds: int, trials: Sequence[GridTrial]
) -> str:
    """The grid alone, as the job page includes it."""
    return render("_grid.html", grid=grid(cases, variants, rounds, trials))
