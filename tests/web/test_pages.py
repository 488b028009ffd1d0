"""The UI's renderers as pure functions: no server, no browser."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from types import SimpleNamespace
from typing import Any

from service.api.schemas import EventView, JobView, TrialCounts, TrialView
from service.report.build import JobFacts, TrialFacts, build_report
from service.report.model import JudgeRate, MetricView
from service.report.render_text import render_text
from service.web.charts import pass_rate_chart
from service.web.grid import build_cells, grid_table
from service.web.judge_matrix import judge_matrix
from service.web.pages import (
    environment_image,
    job_page,
    jobs_page,
    login_page,
    not_found_page,
    trial_page,
)
from service.web.routes import safe_next
from service.web.transcript import transcript
from tests.unit.test_report_shape import _job

EVIL = "<script>alert(1)</script>"
ESCAPED = "&lt;script&gt;alert(1)&lt;/script&gt;"


def metric(value: float | None, ci: list[float] | None, reason: str | None) -> MetricView:
    return MetricView(value=value, ci95=ci, stderr_clustered=None, reason=reason, cases_used=1)


@dataclass
class Variant:
    name: str
    pass_at_1: MetricView
    pass_hat_k: MetricView


def spec(cases: list[str], arms: list[str], model_id: str = "solution") -> dict[str, object]:
    """A stored job spec, as the planner writes it."""
    return {
        "cases": cases,
        "variants": {
            arm: {"model": {"provider": "faux", "id": model_id}, "limits": {}} for arm in arms
        },
        "arms": arms,
    }


def job_view(cases: list[str], arms: list[str], *, planned: int) -> JobView:
    """A finished job of team t, as the API shows it."""
    return JobView(
        id="job-1",
        status="finished",
        team="t",
        suite="s",
        suite_sha256="0" * 64,
        spec=spec(cases, arms),
        planned_trials=planned,
        counts=TrialCounts(),
        created_at=datetime(2025, 1, 1),
        finished_at=None,
    )


@dataclass
class FakeTrial:
    id: str
    case_id: str
    variant: str
    round: int
    attempt: int
    status: str
    outcome: str | None
    error_kind: str | None = None


def test_chart_draws_intervals_and_says_why_a_number_is_missing() -> None:
    svg = pass_rate_chart(
        [
            Variant(
                EVIL,
                metric(0.5, [0.25, 0.75], None),
                metric(None, None, "no case has 2 scored trials"),
            ),
            Variant("b", metric(0.8, None, "one case only"), metric(0.8, None, "one case only")),
        ],
        k=2,
    )
    assert EVIL not in svg and "&lt;script&gt;" in svg
    assert svg.count('class="interval"') == 1
    assert "pass^2 n/a: no case has 2 scored trials" in svg
    assert svg.count(">no interval: one case only</text>") == 2
    assert svg.count('class="point"') == 3


def test_chart_with_one_round_leaves_out_pass_hat_k() -> None:
    svg = pass_rate_chart([Variant("a", metric(1.0, [1.0, 1.0], None), metric(1, None, ""))], k=1)
    assert "pass_hat_k" not in svg and svg.count('class="interval"') == 1


def test_grid_has_a_cell_per_planned_trial_from_its_latest_attempt() -> None:
    trials = [
        FakeTrial("t1", "c1", "a", 1, 1, "finished", "error", "infra_error"),
        FakeTrial("t2", "c1", "a", 1, 2, "finished", "passed"),
        FakeTrial("t3", "c1", "b", 2, 1, "running", None),
        FakeTrial("t4", EVIL, "a", 2, 1, "finished", "failed"),
    ]
    rows = build_cells(["c1", EVIL], ["a", "b"], 2, trials)
    assert [[c.state for c in row] for row in rows] == [
        ["passed", "missing", "missing", "running"],
        ["missing", "failed", "missing", "missing"],
    ]
    assert rows[0][0].trial is not None and rows[0][0].trial.id == "t2"
    html = grid_table(["c1", EVIL], ["a", "b"], 2, trials)
    assert html.count('<td class="cell') == 8
    assert EVIL not in html and ESCAPED in html


def test_transcript_is_text_whatever_the_payload_holds() -> None:
    events = [
        EventView(seq=1, type="message", payload={"role": "user", "content": EVIL}),
        EventView(
            seq=2,
            type="message",
            payload={
                "role": "assistant",
                "content": "",
                "tool_calls": [{"id": "c1", "name": "write", "arguments": {"content": EVIL}}],
            },
        ),
        EventView(
            seq=3, type="tool_call", payload={"id": "c1", "name": "write", "arguments": {"x": EVIL}}
        ),
        EventView(seq=4, type="tool_result", payload={"name": "write", "content": EVIL}),
        EventView(seq=5, type=EVIL, payload={"role": EVIL}),
    ]
    html = transcript(events)
    assert "<script" not in html
    assert html.count("<li class=") == 5
    # The call's arguments appear once, with its own event, not again in the message.
    assert html.count("&#34;x&#34;") == 1 and "&#34;content&#34;" not in html


def test_pages_escape_what_users_control() -> None:
    job = JobView(
        id="job-1",
        status="running",
        team=None,
        suite=EVIL,
        suite_sha256="0" * 64,
        spec=spec(["a"], ["default"], model_id=EVIL),
        planned_trials=1,
        counts=TrialCounts(),
        created_at=datetime(2025, 1, 1),
        finished_at=None,
    )
    page = jobs_page([job], who=EVIL)
    assert EVIL not in page and page.count("&lt;script&gt;") == 3
    assert 'http-equiv="refresh"' in page
    assert EVIL not in login_page(EVIL, next_url='/ui/jobs"><script>')


def test_login_only_redirects_to_ui_pages() -> None:
    assert safe_next("/ui/jobs/job-1") == "/ui/jobs/job-1"
    for bad in (
        None,
        "",
        "https://evil.example/",
        "//evil.example/ui/",
        "/ui//evil",
        "/v1/jobs",
        "/ui/x?y=<z>",
        "/ui/\\evil",
    ):
        assert safe_next(bad) == "/ui/jobs", bad


def test_job_page_escapes_case_and_variant_names_everywhere() -> None:
    base, cand = f"{EVIL}base", f"{EVIL}cand"
    cases = [f"{EVIL}1", f"{EVIL}2"]
    facts = JobFacts(
        id="job-1",
        status="finished",
        suite_name=EVIL,
        suite_sha256="0" * 64,
        rounds=2,
        seed=1,
        planned=8,
        model=EVIL,
        image=EVIL,
        image_digest=None,
        service_version="0",
        created_at=datetime(2025, 1, 1),
        baseline=base,
        arms=(base, cand),
    )
    trials = [
        TrialFacts(case, arm, r, order, 1, "finished", outcome, None, EVIL)
        for order, (case, r, arm, outcome) in enumerate(
            (case, r, arm, "passed" if arm == cand or r == 1 else "error")
            for case in cases
            for r in (1, 2)
            for arm in (base, cand)
        )
    ]
    report = build_report(facts, trials, case_order=cases, generated_at=datetime(2025, 1, 2))
    assert report.comparisons[0].blocked  # the errored baselines block their pairs
    job = JobView(
        id="job-1",
        status="finished",
        team=EVIL,
        suite=EVIL,
        suite_sha256="0" * 64,
        spec=spec(cases, [base, cand]),
        planned_trials=8,
        counts=TrialCounts(),
        created_at=datetime(2025, 1, 1),
        finished_at=None,
    )
    grid = [
        FakeTrial(f"t{i}", t.case_id, t.variant, t.round, 1, t.status, t.outcome)
        for i, t in enumerate(trials)
    ]
    page = job_page(job, report, grid, who=EVIL)
    assert "<script" not in page
    assert page.count('<td class="cell') == 8
    assert 'class="blocked"' in page and "Lift withheld" in page


def test_trial_page_shows_hostile_strings_as_text() -> None:
    # What a suite, a model and an agent control: the case id, the variant, the judges'
    # names and details, the error, the artifacts' names, and every event's payload (the
    # final answer is the last assistant message).
    now = datetime(2025, 1, 1)
    trial = TrialView(
        id="trial-1",
        job_id="job-1",
        case_id=EVIL,
        variant=EVIL,
        round=1,
        order=0,
        attempt=1,
        status="finished",
        outcome="error",
        score=None,
        error_kind="agent_error",
        error_message=EVIL,
        failed_step=EVIL,
        model_requested=EVIL,
        model_returned=EVIL,
        tool_calls=1,
        system_prompt_sha256=EVIL,
        limits_hit=[EVIL],
        usage={EVIL: 1},
        judges=[{"name": EVIL, "score": 0.0, "detail": EVIL}, EVIL],
        timings={EVIL: 0.5},
        container_id=None,
        started_at=now,
        finished_at=now,
        wall_s=1.0,
        artifacts=[f"{EVIL}.txt"],
    )
    job = JobView(
        id="job-1",
        status="finished",
        team=EVIL,
        suite=EVIL,
        suite_sha256="0" * 64,
        spec=spec([EVIL], [EVIL]),
        planned_trials=1,
        counts=TrialCounts(),
        created_at=now,
        finished_at=now,
    )
    events = [
        EventView(seq=1, type="lifecycle", payload={"step": EVIL, "detail": EVIL}),
        EventView(seq=2, type="message", payload={"role": "user", "content": EVIL}),
        EventView(
            seq=3,
            type="message",
            payload={"role": EVIL, "content": EVIL, "model": EVIL, "stop_reason": EVIL},
        ),
        EventView(
            seq=4, type="tool_result", payload={"name": EVIL, "content": EVIL, "error": EVIL}
        ),
        EventView(seq=5, type="message", payload={"role": "assistant", "content": f"Final {EVIL}"}),
    ]
    image = environment_image(trial, EVIL, None)
    page = trial_page(
        trial, job, events, who=EVIL, image=image, artifacts={f"{EVIL}.txt": (9, None)}
    )
    assert "<script" not in page
    assert f'<span class="case-id">{ESCAPED}</span>' in page
    assert f'<pre class="content">Final {ESCAPED}</pre>' in page  # the final answer
    assert f'<span class="error-text">error: {ESCAPED}</span>' in page
    assert f"<td>{ESCAPED}</td>" in page  # a judge's name and detail
    assert 'download="&lt;script&gt;' in page and "%3Cscript%3E" in page  # an artifact
    assert 'href="/ui/trials/trial-1/artifacts/%3Cscript%3E' in page  # and its reading
    assert f'<span class="image">{ESCAPED}</span>' in page  # the job's image, here
    assert "Showing the first" not in page  # no cut: no limit was given


def test_job_and_not_found_pages_show_hostile_strings_as_text() -> None:
    facts = JobFacts(
        id=EVIL,
        status="running",
        suite_name=EVIL,
        suite_sha256="0" * 64,
        rounds=1,
        seed=1,
        planned=1,
        model=EVIL,
        image=EVIL,
        image_digest=None,
        service_version="0",
        created_at=datetime(2025, 1, 1),
        docs_name=EVIL,
    )
    trials = [TrialFacts(EVIL, EVIL, 1, 0, 1, "finished", "failed", None, EVIL)]
    report = build_report(facts, trials, case_order=[EVIL], generated_at=datetime(2025, 1, 2))
    job = JobView(
        id=EVIL,
        status="running",
        team=EVIL,
        suite=EVIL,
        suite_sha256="0" * 64,
        spec=spec([EVIL], [EVIL], model_id=EVIL),
        planned_trials=1,
        counts=TrialCounts(),
        created_at=datetime(2025, 1, 1),
        finished_at=None,
    )
    grid = [FakeTrial(EVIL, EVIL, EVIL, 1, 1, "finished", "failed")]
    page = job_page(job, report, grid, who=EVIL)
    assert "<script" not in page
    assert f'<th class="case" scope="row">{ESCAPED}</th>' in page  # the case id
    assert f'<span class="job-id">{ESCAPED}</span>' in page
    assert f'<form method="post" action="/ui/jobs/{ESCAPED}/cancel"' in page
    assert f"<title>{ESCAPED}</title>" in page  # the variant, in the chart
    missing = not_found_page(f"No job {EVIL}.", who=EVIL)  # the id comes from the URL
    assert "<script" not in missing and f"No job {ESCAPED}." in missing


def test_templates_mark_nothing_safe() -> None:
    # Autoescaping is on for every template and no value bypasses it: the one place that
    # would need raw markup (the chart's SVG) is a template itself.
    import re
    from pathlib import Path

    from service.web import templating

    assert templating.ENV.autoescape is True
    web = Path(templating.__file__).parent
    for path in web.glob("templates/*"):
        text = path.read_text()
        assert not re.search(r"\|\s*safe\b|autoescape\s+false", text), path
    for path in web.glob("*.py"):
        assert not re.search(r"\bMarkup\b|markupsafe", path.read_text()), path


def test_job_page_shows_each_variants_judge_pass_rates() -> None:
    facts = JobFacts(
        id="job-1",
        status="finished",
        suite_name="s",
        suite_sha256="0" * 64,
        rounds=1,
        seed=1,
        planned=2,
        model="faux/x",
        image="img",
        image_digest=None,
        service_version="0",
        created_at=datetime(2025, 1, 1),
    )
    trials = [
        TrialFacts("c", "default", 1, i, 1, "finished", outcome, None, None)
        for i, outcome in enumerate(("passed", "failed"))
    ]
    report = build_report(
        facts,
        trials,
        case_order=["c"],
        generated_at=datetime(2025, 1, 2),
        judge_counts=[("default", EVIL, 1, 2), ("default", "tool_called(write)", 2, 2)],
    )
    job = job_view(["c"], ["default"], planned=2)
    grid = [
        FakeTrial(f"t{i}", t.case_id, t.variant, 1, 1, t.status, t.outcome)
        for i, t in enumerate(trials)
    ]
    page = job_page(job, report, grid, who="t")
    assert "<script" not in page
    assert '<h2 id="judges">Judges</h2>' in page and page.count('class="judges-matrix"') == 1
    assert '<th scope="col" class="variant">default</th>' in page
    rows = re.findall(
        r'<tr data-judge="([^"]*)"><th[^>]*>[^<]*</th>\s*<td class="num">([^<]*)<span', page
    )
    assert rows == [(ESCAPED, "50.0% "), ("tool_called(write)", "100.0% ")]
    assert '<span class="muted">1/2</span>' in page and '<span class="muted">2/2</span>' in page


def test_judge_matrix_has_a_row_per_judge_and_a_column_per_variant() -> None:
    def rate(name: str, passed: int, scored: int) -> JudgeRate:
        return JudgeRate(name=name, passed=passed, scored=scored, pass_rate=passed / scored)

    def variant(name: str, *judges: JudgeRate) -> Any:
        return SimpleNamespace(name=name, judges=list(judges))

    without = variant("without_docs", rate("file_equals", 1, 4), rate("answer_given", 4, 4))
    bare = variant("bare")  # recorded no judge: no column
    with_docs = variant("with_docs", rate("answer_given", 3, 4), rate("rubric", 2, 4))
    matrix = judge_matrix([without, bare, with_docs])
    assert matrix is not None and matrix.variants == ["without_docs", "with_docs"]
    assert [(name, [r and r.passed for r in rates]) for name, rates in matrix.rows] == [
        ("file_equals", [1, None]),
        ("answer_given", [4, 3]),
        ("rubric", [None, 2]),
    ]
    assert judge_matrix([bare]) is None


def test_the_page_shows_a_rates_uncertainty_as_the_text_report_does() -> None:
    facts = _job(planned=4, baseline=None, arms=(), docs_sha256=None)
    job = job_view(["a", "b"], ["default"], planned=4)
    for outcomes, shown, hidden in (
        # Every case passed: Wilson's interval is wide and the SE 0, so the reason is shown.
        (("passed",) * 4, "(every case scored the same; the interval is Wilson", "SE "),
        # The cases differ: the bootstrap interval, and the SE it agrees with.
        (("passed", "passed", "passed", "failed"), "SE 25.0 pp", "Wilson"),
    ):
        trials = [
            TrialFacts(case, "default", r, i, 1, "finished", outcome, None, None)
            for i, ((case, r), outcome) in enumerate(
                zip((("a", 1), ("a", 2), ("b", 1), ("b", 2)), outcomes, strict=True)
            )
        ]
        report = build_report(
            facts, trials, case_order=["a", "b"], generated_at=datetime(2025, 1, 2)
        )
        page = job_page(job, report, [], "t")
        row = re.findall(r'<td class="metric">.*?</td>', page, re.S)[0]  # pass@1's
        assert f'<span class="muted uncertainty">{shown}' in row and hidden not in row
        (line,) = [x for x in render_text(report).splitlines() if x.startswith("  pass@1 ")]
        assert shown in line and hidden not in line
