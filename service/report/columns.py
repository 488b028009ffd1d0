"""A job's attempts as columns: what the report reads of 100,000 trials, held as numpy arrays.

A report looks at every attempt of a job several times (its final attempts, verdicts,
per-case tallies, the pairs of a comparison, the telemetry of both arms). Done per trial in
Python, that is most of a large job's report; as columns, each step is a few array
operations. Text columns (case, variant, status, outcome, error kind, prompt hash) are coded:
`Coded.values[code]` is the text, codes follow the texts' sort order, so the smallest code
is the smallest text, as Python compares them. The numbers are the report's, to the bit:
`telemetry` keeps integer measurements integers and sums floats with `math.fsum`, as
`paired` always did.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np
import numpy.typing as npt

from service.domain.outcomes import COUNTED_AS_FAILED
from service.domain.status import Outcome, TrialStatus
from service.store.reports import REPORT_COLUMNS

Ints = npt.NDArray[np.int64]
Bools = npt.NDArray[np.bool_]

# The columns every report reads of every attempt, in TrialFacts' order (`build`): what the
# store's report query selects.
FIELDS = REPORT_COLUMNS
_TELEMETRY_FIELDS = ("input_tokens", "output_tokens", "tool_calls", "latency_s", "cost_usd")

# Integers up to this convert to float64 and back unchanged.
_EXACT = 1 << 53


@dataclass(frozen=True)
class Coded:
    """A text column: `values[codes[i]]` is row i's text; values in sort order (None first)."""

    values: tuple[Any, ...]
    codes: Ints

    @classmethod
    def of(cls, column: Sequence[Any]) -> Coded:
        distinct = set(column)
        values = (None,) * (None in distinct) + tuple(sorted(distinct - {None}))
        if len(values) == 1:  # a finished comparison's status, say: one text, code 0
            return cls(values, np.zeros(len(column), dtype=np.int64))
        index = {value: code for code, value in enumerate(values)}
        codes = np.fromiter(map(index.__getitem__, column), dtype=np.int64, count=len(column))
        return cls(values, codes)

    def code(self, value: Any) -> int:
        """The code of `value`, or -1 when no row holds it."""
        try:
            return self.values.index(value)
        except ValueError:
            return -1

    def table(self, test: Any) -> Bools:
        """`test(value)` for every code, to index with `codes`."""
        return np.array([bool(test(value)) for value in self.values], dtype=np.bool_)


@dataclass(frozen=True)
class Measured:
    """One telemetry column: which rows measured it, and the values as Python would add them:
    `integer[i]` when row i's value is an int (summed exactly), else `real[i]`, a float."""

    measured: Bools
    integer: Bools
    ints: Ints
    real: npt.NDArray[np.float64]

    def total(self, rows: npt.NDArray[Any]) -> int | float:
        """The sum of the measured values of `rows` (indices or a mask), as `paired._sum`
        makes it: an int when every value is an int, else a float rounded once (fsum)."""
        return sum_values(self.integer[rows], self.ints[rows], self.real[rows])

    def count(self, rows: npt.NDArray[Any]) -> int:
        return int(np.count_nonzero(self.measured[rows]))


def sum_values(integer: Bools, ints: Ints, real: npt.NDArray[np.float64]) -> int | float:
    """Measured values summed as `paired` always summed them: integers exactly when every
    one is an int, else as floats rounded once (`math.fsum`)."""
    if bool(integer.all()):
        return int(ints.sum(dtype=np.int64)) if len(ints) else 0
    return math.fsum(real.tolist())


def _measured(values: Sequence[Any]) -> Measured:
    """`paired._measured` over a column: None, a bool, a negative or a non-finite value is
    not a measurement."""
    n = len(values)
    kinds = set(map(type, values))
    if kinds <= {int, type(None)}:
        real = np.array(values, dtype=np.float64)  # None -> nan
        present = ~np.isnan(real)
        if present.any() and float(np.abs(real[present]).max()) >= _EXACT:
            return _measured_slowly(values)
        ints = np.where(present, real, 0).astype(np.int64)
        return Measured(present & (real >= 0), np.ones(n, dtype=np.bool_), ints, real)
    if kinds <= {float, type(None)}:
        real = np.array(values, dtype=np.float64)
        with np.errstate(invalid="ignore"):
            measured = np.isfinite(real) & (real >= 0)
        return Measured(measured, np.zeros(n, dtype=np.bool_), np.zeros(n, dtype=np.int64), real)
    return _measured_slowly(values)


def _measured_slowly(values: Sequence[Any]) -> Measured:
    # Mixed types (records made by hand, not rows): each value looked at in Python.
    n = len(values)
    measured = np.zeros(n, dtype=np.bool_)
    integer = np.zeros(n, dtype=np.bool_)
    ints = np.zeros(n, dtype=np.int64)
    real = np.zeros(n, dtype=np.float64)
    for i, value in enumerate(values):
        if value is None or isinstance(value, bool) or not math.isfinite(value) or value < 0:
            continue
        measured[i] = True
        real[i] = float(value)
        if isinstance(value, int) and value < _EXACT:
            integer[i] = True
            ints[i] = value
    return Measured(measured, integer, ints, real)


def _tokens(tokens_in: Measured, tokens_out: Measured) -> Measured:
    # Both halves or nothing: input tokens alone would undercount and look like a saving.
    return Measured(
        tokens_in.measured & tokens_out.measured,
        tokens_in.integer & tokens_out.integer,
        tokens_in.ints + tokens_out.ints,
        tokens_in.real + tokens_out.real,
    )


@dataclass(frozen=True)
class Columns:
    """A job's attempts (or a comparison's records) as columns, row i being one attempt."""

    case: Coded
    variant: Coded
    round: Ints
    order: Ints
    attempt: Ints
    status: Coded
    outcome: Coded
    error_kind: Coded
    # Read only by a comparison and where the store did not give them apart; None: unread.
    model_returned: Sequence[str | None] | None = None
    telemetry_values: Mapping[str, Sequence[Any]] = field(default_factory=dict)
    system_prompt_sha256: Coded | None = None
    # row -> the limits it hit, for the few rows that hit any.
    limits_hit: Mapping[int, tuple[str, ...]] = field(default_factory=dict)

    @classmethod
    def of(cls, columns: Mapping[str, Sequence[Any]]) -> Columns:
        """From columns by FIELDS' names; only the first eight are required."""
        limits = columns.get("limits_hit")
        prompts = columns.get("system_prompt_sha256")
        return cls(
            case=Coded.of(columns["case_id"]),
            variant=Coded.of(columns["variant"]),
            round=np.array(columns["round"], dtype=np.int64),
            order=np.array(columns["order"], dtype=np.int64),
            # A comparison's records (`paired.Scored`) are final attempts and name none.
            attempt=np.array(columns["attempt"], dtype=np.int64)
            if "attempt" in columns
            else np.ones(len(columns["round"]), dtype=np.int64),
            status=Coded.of(columns["status"]),
            outcome=Coded.of(columns["outcome"]),
            error_kind=Coded.of(columns["error_kind"]),
            model_returned=columns.get("model_returned"),
            telemetry_values={name: columns[name] for name in _TELEMETRY_FIELDS if name in columns},
            system_prompt_sha256=None if prompts is None else Coded.of(prompts),
            limits_hit={} if limits is None else {i: hit for i, hit in enumerate(limits) if hit},
        )

    @classmethod
    def of_records(cls, records: Iterable[Any], names: Sequence[str] = FIELDS) -> Columns:
        """From records with these attributes (TrialFacts, ArmTrial, any `paired.Scored`);
        a name a record lacks reads as None."""
        rows = list(records)
        return cls.of({name: [getattr(row, name, None) for row in rows] for name in names})

    def __len__(self) -> int:
        return len(self.round)

    @cached_property
    def verdicts(self) -> npt.NDArray[np.int8]:
        """`outcomes.verdict` of every row: 1 passed, 0 failed, -1 not scored."""
        finished = self.status.table(lambda s: s == TrialStatus.FINISHED)[self.status.codes]
        scored = self.outcome.table(lambda o: o in (Outcome.PASSED, Outcome.FAILED))
        passed = self.outcome.table(lambda o: o == Outcome.PASSED)[self.outcome.codes]
        counted = self.error_kind.table(lambda k: k in COUNTED_AS_FAILED)[self.error_kind.codes]
        result = np.where(
            scored[self.outcome.codes], passed.astype(np.int8), np.where(counted, 0, -1)
        ).astype(np.int8)
        result[~finished] = -1
        return result

    @cached_property
    def finals(self) -> Ints:
        """The final attempt of each planned trial (variant, order), by variant then order:
        its highest attempt, the first row of those when two share it."""
        if not len(self):
            return np.zeros(0, dtype=np.int64)
        rows = np.lexsort((self.attempt, self.order, self.variant.codes))  # stable
        variant, order, attempt = self.variant.codes[rows], self.order[rows], self.attempt[rows]
        same_trial = (variant[1:] == variant[:-1]) & (order[1:] == order[:-1])
        same_attempt = same_trial & (attempt[1:] == attempt[:-1])
        positions = np.arange(len(rows))
        run_start = np.maximum.accumulate(
            np.where(np.concatenate(([True], ~same_attempt)), positions, 0)
        )
        last = np.flatnonzero(np.concatenate((~same_trial, [True])))
        return rows[run_start[last]]

    @cached_property
    def telemetry(self) -> dict[str, Measured]:
        """Each telemetry of `model.TELEMETRY`, from the columns read."""
        read = {name: _measured(values) for name, values in self.telemetry_values.items()}
        if len(read) < len(_TELEMETRY_FIELDS):
            nothing = _measured([None] * len(self))
            read = {name: read.get(name, nothing) for name in _TELEMETRY_FIELDS}
        return {
            "tokens": _tokens(read["input_tokens"], read["output_tokens"]),
            "tool_calls": read["tool_calls"],
            "latency_s": read["latency_s"],
            "cost_usd": read["cost_usd"],
        }

    def models(self) -> list[str]:
        return sorted({m for m in self.model_returned or () if m})
