"""The job page's judges as one matrix: a row per judge, a column per variant, each cell the
judge's own pass rate in that variant. One table for any number of variants, where a table
per variant repeated every judge's name (`templates/_judge_rates.html` draws it)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from service.report.model import JudgeRate, VariantReport


@dataclass(frozen=True)
class JudgeMatrix:
    variants: list[str]
    # (judge, its rate in each variant in `variants`' order; None where no trial recorded it)
    rows: list[tuple[str, list[JudgeRate | None]]]


def judge_matrix(variants: Sequence[VariantReport]) -> JudgeMatrix | None:
    """The matrix of the variants that recorded judges, judges in the order they first
    appear; None when no variant recorded one."""
    judged = [v for v in variants if v.judges]
    if not judged:
        return None
    by_variant = [{rate.name: rate for rate in v.judges} for v in judged]
    names = list(dict.fromkeys(rate.name for v in judged for rate in v.judges))
    rows = [(name, [rates.get(name) for rates in by_variant]) for name in names]
    return JudgeMatrix([v.name for v in judged], rows)
