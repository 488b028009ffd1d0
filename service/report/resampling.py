"""The bootstrap's draws, by method version, and the bootstrap of means of per-case values.

A report's intervals depend on which cases each resample picks, so the way they are drawn
is part of the report's meaning. It is versioned, and every job keeps the version it was
submitted under (`JobSpec.bootstrap`; jobs stored before versions existed are 1), so a
stored job's report, recomputed, gives the intervals it always gave. The report's record
names the version.

- Version 1: `random.Random(seed).choices(range(n), k=n)` per resample, the standard
  library's Mersenne Twister; one Python call per draw (about 1 s per 10M draws).
- Version 2: resample r is the r-th call of
  `numpy.random.Generator(numpy.random.PCG64(seed)).integers(0, n, size=n)`. The draws are
  made a block of resamples per call (which draws the same) and counted per case
  (`bincount`), and every statistic over the same cases is one integer product of that
  count matrix with the cases' values, so the arms' rates and the paired lift share one
  draw matrix where their case sets agree.
- Version 3: a column of few distinct values (16 d <= n for d distinct values over n
  cases, as every report's columns are: a case's pass@1 over k rounds takes one of k + 1
  values) is resampled as the counts of its distinct values: resample r is the r-th row of
  `Generator(PCG64(seed)).multinomial(n, m / n, size=resamples)`, m the number of cases
  holding each distinct value, values ascending, a generator of its own per column. How
  often a resample picks each value is all its mean depends on, and those counts are
  exactly multinomial, so this is the same case bootstrap in distribution, at a cost of d
  rather than n per resample (2,000 resamples of 10,000 cases: about 2 ms against 120). A
  column of many distinct values is drawn as version 2 draws it.

Every version computes a resample's mean exactly where it can: each case's value is a
fraction, scaled to the column's common denominator, so the mean of a resample is an integer
over an integer, rounded once (`estimates._exact_mean`). Versions 2 and 3 sum integers (held
in float64) and divide once, exact while every sum stays under 2**53 (checked; else the
per-case floats are summed, which only denominators with a common multiple past 2**53 / n
need).
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field

from service.domain.job_spec import BOOTSTRAP_VERSION

V1 = 1
V2 = 2
V3 = 3
CURRENT = BOOTSTRAP_VERSION
VERSIONS = (V1, V2, V3)

GENERATORS = {
    V1: "random.Random(seed).choices(range(n), k=n) per resample (Python's Mersenne Twister)",
    V2: "numpy.random.Generator(PCG64(seed)).integers(0, n, size=n) per resample",
    V3: (
        "numpy.random.Generator(PCG64(seed)).multinomial(n, m / n) per resample over a "
        "column's d distinct values where 16 d <= n, else as version 2"
    ),
}

# Values of one block of resamples held at once (draws and counts, 8 bytes each, 2 MiB
# apiece): large enough that numpy's per-call cost vanishes, small enough to stay in cache
# and leave the resident set alone.
_BLOCK_VALUES = 1 << 18
_EXACT = 1 << 53
# Version 3 counts distinct values where 16 d <= n: a multinomial draw costs about 16 times
# an integer draw per value (numpy 2.4: 115 against 6 ns), so below this it is the cheaper.
_FEW = 16

Fractions = Sequence[tuple[int, int]]
"""The per-case values of one statistic, (numerator, denominator), cases in id order."""


def check_version(version: object) -> int:
    if isinstance(version, bool) or version not in VERSIONS:
        raise ValueError(
            f"the bootstrap method must be one of {', '.join(map(str, VERSIONS))}, got {version!r}"
        )
    assert isinstance(version, int)
    return version


def case_resamples(n: int, *, seed: int, resamples: int) -> Iterator[list[int]]:
    """Version 1: the indices (into n cases in id order) that each resample picks."""
    rng = random.Random(seed)
    cases = range(n)
    for _ in range(resamples):
        yield rng.choices(cases, k=n)


def case_resamples_v2(n: int, *, seed: int, resamples: int) -> Iterator[list[int]]:
    """Version 2, one resample at a time: the reference `mean_distributions` is checked
    against, and what `bootstrap_ci` uses for a statistic it cannot vectorise."""
    import numpy as np

    rng = np.random.Generator(np.random.PCG64(seed))
    for _ in range(resamples):
        yield rng.integers(0, n, size=n).tolist()


def picks(version: int, n: int, *, seed: int, resamples: int) -> Iterator[list[int]]:
    """The indices each resample picks, for a statistic that sees cases rather than values:
    to version 3 every case is distinct (d = n), so it draws as version 2."""
    if version == V1:
        return case_resamples(n, seed=seed, resamples=resamples)
    return case_resamples_v2(n, seed=seed, resamples=resamples)


def _scaled(fractions: Fractions) -> tuple[list[int], int]:
    common = math.lcm(*(den for _, den in fractions))
    return [num * (common // den) for num, den in fractions], common * len(fractions)


def _sums_exact(numerators: Iterable[int], denominator: int, n: int) -> bool:
    """Whether every resample's integer sum of n of these, and the denominator, are below
    2**53: then float64 holds the sums exactly and one division rounds the mean once."""
    return max(map(abs, numerators)) * n < _EXACT and denominator < _EXACT


def mean_distributions(
    columns: Sequence[Fractions], *, version: int, seed: int, resamples: int
) -> list[list[float]]:
    """Bootstrap distributions of the mean of each column's per-case values, every column
    over the same cases (row i of every column is case i) and so the same draws."""
    n = len(columns[0])
    if any(len(column) != n for column in columns):
        raise ValueError("every column of one bootstrap must hold the same cases")
    if version == V1:
        return _v1(columns, seed=seed, resamples=resamples)
    if version == V2:
        return _v2(columns, seed=seed, resamples=resamples)
    return _v3(columns, seed=seed, resamples=resamples)


def _v1(columns: Sequence[Fractions], *, seed: int, resamples: int) -> list[list[float]]:
    n = len(columns[0])
    scaled = [_scaled(column) for column in columns]
    distributions: list[list[float]] = [[] for _ in columns]
    for drawn in case_resamples(n, seed=seed, resamples=resamples):
        for (numerators, denominator), values in zip(scaled, distributions, strict=True):
            values.append(sum(map(numerators.__getitem__, drawn)) / denominator)
    return distributions


def _v2(columns: Sequence[Fractions], *, seed: int, resamples: int) -> list[list[float]]:
    import numpy as np

    n, m = len(columns[0]), len(columns)
    scaled = [_scaled(column) for column in columns]
    exact = all(_sums_exact(numerators, denominator, n) for numerators, denominator in scaled)
    if exact:
        # Integers as float64, for BLAS's product: each partial sum of counts times values
        # is an integer of at most n * max|value| < 2**53, so every step is exact whatever
        # order or threads the product takes (three times faster than numpy's int64 one).
        matrix = np.array([numerators for numerators, _ in scaled], dtype=np.float64).T.copy()
        divisors = np.array([denominator for _, denominator in scaled], dtype=np.float64)
    else:
        floats = [[num / den for num, den in column] for column in columns]
        values = np.array(floats, dtype=np.float64)
        divisors = np.full(m, float(n))
    sums = np.empty((resamples, m), dtype=np.float64)
    rng = np.random.Generator(np.random.PCG64(seed))
    block = max(1, min(resamples, _BLOCK_VALUES // max(n, 1)))
    offsets = (np.arange(block, dtype=np.int64) * n)[:, None]
    for start in range(0, resamples, block):
        rows = min(block, resamples - start)
        # One call for the block draws what a call per resample would, row by row (the
        # version's definition): numpy takes bounded draws below 2**32 32 bits at a time,
        # and PCG64 keeps the unused half of a 64-bit output in its state for the next
        # call, so the stream does not depend on how it is split into calls (the reference
        # tests hold this). A call per resample was half the bootstrap at 10,000 cases.
        drawn = rng.integers(0, n, size=(rows, n))
        if exact:
            # How often each resample picked each case, times each case's integer value.
            drawn += offsets[:rows]
            counts = np.bincount(drawn.ravel(), minlength=rows * n).reshape(rows, n)
            sums[start : start + rows] = counts.astype(np.float64) @ matrix
        else:
            for j in range(m):
                sums[start : start + rows, j] = values[j][drawn].sum(axis=1)
    means = sums / divisors
    return [means[:, j].tolist() for j in range(m)]


def _v3(columns: Sequence[Fractions], *, seed: int, resamples: int) -> list[list[float]]:
    import numpy as np

    n = len(columns[0])
    distributions: list[list[float] | None] = [None] * len(columns)
    many: list[int] = []
    for j, column in enumerate(columns):
        numerators, denominator = _scaled(column)
        tally = Counter(numerators)
        if not _sums_exact(tally, denominator, n) or _FEW * len(tally) > n:
            many.append(j)
            continue
        # Its own generator: a column's interval does not depend on which others the
        # report resamples beside it.
        rng = np.random.Generator(np.random.PCG64(seed))
        values = sorted(tally)
        holding = np.array([tally[value] for value in values], dtype=np.float64)
        counts = rng.multinomial(n, holding / n, size=resamples)
        # Integers as float64, as in version 2: each sum is an integer below 2**53, exact.
        sums = counts.astype(np.float64) @ np.array(values, dtype=np.float64)
        distributions[j] = (sums / float(denominator)).tolist()
    if many:
        # Version 2's draws for these: shared, they are what each column would draw alone.
        drawn = _v2([columns[j] for j in many], seed=seed, resamples=resamples)
        for j, distribution in zip(many, drawn, strict=True):
            distributions[j] = distribution
    return [d for d in distributions if d is not None]


@dataclass
class Batch:
    """The bootstraps one report needs, run together: columns over the same cases share
    their draws (one pass over one draw matrix), whichever part of the report asked."""

    version: int
    seed: int
    resamples: int
    _columns: dict[tuple[str, ...], list[Fractions]] = field(default_factory=dict)
    _results: dict[tuple[str, ...], list[list[float]]] = field(default_factory=dict)

    def add(self, cases: tuple[str, ...], column: Fractions) -> tuple[tuple[str, ...], int]:
        """Ask for the bootstrap of `column` (over `cases`, in id order); the ticket reads
        its distribution after `run`."""
        if self._results:
            raise RuntimeError("the batch has already run; add every column before run()")
        columns = self._columns.setdefault(cases, [])
        columns.append(column)
        return cases, len(columns) - 1

    def run(self) -> None:
        for cases, columns in self._columns.items():
            self._results[cases] = mean_distributions(
                columns, version=self.version, seed=self.seed, resamples=self.resamples
            )

    def distribution(self, ticket: tuple[tuple[str, ...], int]) -> list[float]:
        cases, index = ticket
        return self._results[cases][index]
