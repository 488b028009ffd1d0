"""The text report's layout: its tables keep their columns whatever the task ids' length, and
a rate's interval is never printed beside a standard error that seems to contradict it."""

from __future__ import annotations

import re
from datetime import datetime

from service.report.build import TrialFacts, build_report
from service.report.model import Report
from service.report.render_text import render_text
from tests.unit.test_report_shape import _job

LONG = "harbor-task-" + "x" * 60  # longer than the case column's 28 characters


def _report(outcomes: dict[str, list[str]], judges: tuple[str, ...] = ()) -> Report:
    cases = list(outcomes)
    facts = _job(planned=2 * len(cases), baseline=None, arms=(), docs_sha256=None)
    trials = [
        TrialFacts(case, "default", r + 1, i * 2 + r, 1, "finished", outcome, None, None)
        for i, case in enumerate(cases)
        for r, outcome in enumerate(outcomes[case])
    ]
    counts = [("default", name, 1, 4) for name in judges]
    return build_report(
        facts, trials, case_order=cases, generated_at=datetime(2026, 1, 2), judge_counts=counts
    )


def _table(text: str, heading: str) -> list[str]:
    """The lines of the table under `heading`, the heading's line first."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip().startswith(heading))
    end = next(i for i in range(start, len(lines)) if not lines[i].strip())
    return lines[start:end]


def _number_ends(line: str) -> tuple[int, int]:
    """Where the first two columns after a line's name end."""
    after = len(line) - len(line.lstrip()) + len(line.split()[0])
    first, second = list(re.finditer(r"\S+", line[after:]))[:2]
    return after + first.end(), after + second.end()


def test_long_task_ids_keep_the_case_tables_columns_in_line() -> None:
    report = _report(
        {"a": ["passed", "failed"], LONG: ["passed", "passed"], "b": ["failed", "failed"]},
        judges=("file_equals", "rubric:" + "y" * 50),
    )
    text = render_text(report)
    for heading, rows in (("case", 3), ("judge", 2)):
        table = _table(text, heading)
        assert len(table) == 1 + rows, table
        # The numbers are right-aligned: each column ends where its heading does, on every
        # line, however long the name before it.
        assert len({_number_ends(line) for line in table}) == 1, table
    cases = _table(text, "case")
    assert cases[2].startswith(f"  {LONG} ")
    assert [line.split()[1:4] for line in cases[1:]] == [
        ["2", "1", "50%"],
        ["2", "2", "100%"],
        ["2", "0", "0%"],
    ]


def test_the_standard_error_is_shown_only_beside_the_bootstrap_interval() -> None:
    every_case_passed = render_text(_report({"a": ["passed"] * 2, "b": ["passed"] * 2}))
    (line,) = [line for line in every_case_passed.splitlines() if line.startswith("  pass@1 ")]
    # A Wilson interval over 2 cases is wide while the cases' SE is 0: the reason, not "SE".
    assert "[95% CI 34.2-100.0]" in line
    assert "SE" not in line and "every case scored the same" in line

    mixed = render_text(_report({"a": ["passed", "failed"], "b": ["passed", "passed"]}))
    (line,) = [line for line in mixed.splitlines() if line.startswith("  pass@1 ")]
    assert "[95% CI" in line and "SE 25.0 pp" in line
