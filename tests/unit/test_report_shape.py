"""Reports are `model.Report`s whose JSON reads back as the same model (extra fields
forbidden), so the documented shape is the one the endpoint serves."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest
from pydantic import TypeAdapter, ValidationError

from service.report.build import JobFacts, TrialFacts, build_report
from service.report.model import CaseRow, PairOrder, Report
from service.report.render_text import render_text


def _job(**overrides: object) -> JobFacts:
    fields: dict[str, object] = {
        "id": "job-1",
        "status": "finished",
        "suite_name": "demo",
        "suite_sha256": "a" * 64,
        "rounds": 2,
        "seed": 3,
        "planned": 8,
        "model": "faux/informed",
        "image": "examhall/sandbox:abc",
        "image_digest": "sha256:" + "b" * 64,
        "service_version": "0.1.0",
        "created_at": datetime(2026, 12, 1),
        "baseline": "without_docs",
        "arms": ("without_docs", "with_docs"),
        "docs_sha256": "c" * 64,
        "docs_name": "demo",
    }
    fields.update(overrides)
    return JobFacts(**fields)  # type: ignore[arg-type]


def _trials(*, blocked: bool) -> list[TrialFacts]:
    trials, order = [], 0
    for round_ in (1, 2):
        for case_id in ("a", "b"):
            for arm in ("without_docs", "with_docs"):
                passed = arm == "with_docs" or case_id == "a"
                kind = (
                    "infra_error"
                    if blocked and (case_id, round_, arm) == ("b", 2, "with_docs")
                    else None
                )
                trials.append(
                    TrialFacts(
                        case_id, arm, round_, order, 1, "finished",
                        "error" if kind else ("passed" if passed else "failed"),
                        kind, "faux/informed",
                        input_tokens=100, output_tokens=10, tool_calls=2, latency_s=0.4,
                        system_prompt_sha256=arm,
                        limits_hit=("pids",) if case_id == "a" else (),
                    )
                )  # fmt: skip
                order += 1
    return trials


def test_published_and_withheld_reports_match_the_documented_schema() -> None:
    for blocked in (False, True):
        report = build_report(
            _job(),
            _trials(blocked=blocked),
            case_order=["a", "b"],
            generated_at=datetime(2026, 12, 2),
        )
        parsed = Report.model_validate(report.model_dump(mode="json"))
        assert parsed == report
        _check_unvalidated_rows(report.model_dump(mode="json"))
        comparison = parsed.comparisons[0]
        assert (comparison.headline is None) == blocked
        assert "pass@1" in render_text(report)


def _check_unvalidated_rows(dumped: dict[str, Any]) -> None:
    """The per-case rows and pair orders the model does not validate (it trusts `build`
    and `paired` with them, for speed) have the documented shape all the same."""
    for variant in dumped["variants"]:
        TypeAdapter(list[CaseRow]).validate_python(variant["cases"], strict=True)
        assert variant["cases"], "a variant of these jobs has cases"
    for comparison in dumped["comparisons"]:
        TypeAdapter(list[PairOrder]).validate_python(comparison["order"], strict=True)
        assert comparison["order"], "a comparison of these jobs has pairs"


def test_the_rows_check_refuses_a_row_of_another_shape() -> None:
    report = build_report(
        _job(), _trials(blocked=False), case_order=["a", "b"], generated_at=datetime(2026, 12, 2)
    )
    dumped = report.model_dump(mode="json")
    dumped["comparisons"][0]["order"][0]["extra"] = 1
    with pytest.raises(ValidationError):
        _check_unvalidated_rows(dumped)


def test_single_variant_report_matches_the_schema() -> None:
    job = _job(baseline=None, arms=("default",), docs_sha256=None, docs_name=None, rounds=1)
    trials = [TrialFacts("a", "default", 1, 0, 1, "finished", "passed", None, None)]
    report = build_report(job, trials, case_order=["a"], generated_at=datetime(2026, 12, 2))
    assert Report.model_validate(report.model_dump(mode="json")) == report
    _check_unvalidated_rows(report.model_dump(mode="json"))
    assert report.comparisons == []


def test_store_and_report_never_import_the_api_or_the_web() -> None:
    # The report is built below the HTTP layer: the API and the pages call it, never the
    # other way round.
    import ast
    from pathlib import Path

    import service

    root = Path(service.__file__).parent
    for package in ("store", "report"):
        for path in (root / package).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ImportFrom):
                    names = [node.module or ""]
                elif isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                else:
                    continue
                for name in names:
                    assert not name.startswith(("service.api", "service.web")), (path, name)


def test_a_cancelled_jobs_report_says_it_ended_and_a_running_ones_that_it_goes_on() -> None:
    when = {"case_order": ["a", "b"], "generated_at": datetime(2026, 12, 2)}
    cancelled = build_report(_job(status="cancelled"), _trials(blocked=False), **when)
    assert any(n.startswith("The job was cancelled: 8 of 8") for n in cancelled.notes)
    assert not any("still" in note for note in cancelled.notes), cancelled.notes
    running = build_report(_job(status="running"), _trials(blocked=False), **when)
    assert any(n.startswith("The job is still running") for n in running.notes), running.notes
