"""The job and trial pages as a reader meets them, in headless Chromium at a desktop's width
and a phone's: the job page's sections in reading order, its judges as one matrix and its
agreement as one table; the trial page's image; text artifacts read in the browser as text,
never as a page of this origin. The jobs run on the fake backend (tests/review_jobs.py's
cases and outcomes, with sixteen judges and a few artifacts of this module's); the control
plane over HTTP, SQLite and the browser are real."""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from sandbox.protocol import (
    ArtifactMessage,
    CaseInfo,
    CasesMessage,
    EventMessage,
    JudgeScore,
    MessageEvent,
    ResultMessage,
    TrialResult,
)
from service.backends.fake import FakeBackend, FakeWorker
from service.web.artifact_text import VIEW_MAX_BYTES
from tests import review_jobs
from tests.docker.conftest import Server, serve
from tests.review_jobs import CASES
from tests.web.conftest import require_browser
from tests.web.test_web_ui import as_cookie, by_css, log_in, one, screenshot

if TYPE_CHECKING:
    from selenium.webdriver.chrome.webdriver import WebDriver

JUDGES = ["file_equals", "answer_given", *(f"rubric:criterion-{i}" for i in range(14))]
# The one trial that leaves the artifacts below, beside its session.jsonl.
WITH_ARTIFACTS = ("case-1", 1, "with_docs")
PWNED = "<script>document.title='pwned'</script><h1 id=pwned>pwned</h1>"
ARTIFACTS = {
    "page.html": PWNED.encode(),
    "notes.txt": "Résumé of the run: ok\n".encode(),
    "blob.bin": bytes(range(256)),
    "big.log": b"x" * (VIEW_MAX_BYTES + 1),
}
READABLE = {"page.html", "notes.txt", "session.jsonl"}
SECTIONS = ["Comparisons", "Pass rates", "Trials", "Judges", "Human review", "Record"]
PHONE, DESKTOP = 390, 1400


def _artifact(name: str, content: bytes) -> ArtifactMessage:
    return ArtifactMessage(
        name, base64.b64encode(content).decode(), hashlib.sha256(content).hexdigest(), len(content)
    )


def _worker(w: FakeWorker) -> int:
    request: dict[str, Any] = json.loads(w.request)
    if request["type"] == "list_cases":
        w.say(CasesMessage([CaseInfo(id=name, scripts=["solution"]) for name in CASES]))
        return 0
    spec = request["spec"]
    trial = (spec["case_id"], spec["round"], spec["variant"])
    passed = review_jobs.passes(*trial)
    if trial == WITH_ARTIFACTS:
        for name, content in ARTIFACTS.items():
            w.say(_artifact(name, content))
    w.say(EventMessage(1, MessageEvent("user", "Write ok to x.txt")))
    # The first judge follows the outcome; the rubrics each pass a different share.
    scores = [1.0 if passed else 0.0] + [
        float((i + len(spec["case_id"]) + spec["round"]) % (i % 4 + 2) != 0)
        for i in range(1, len(JUDGES))
    ]
    judged = [
        JudgeScore(name, s, f"{name} said {s}") for name, s in zip(JUDGES, scores, strict=True)
    ]
    outcome = "passed" if passed else "failed"
    w.say(ResultMessage(TrialResult(outcome, score=scores[0], judges=judged, final_text="ok")))
    return 0


@dataclass
class Reading:
    server: Server
    token: str
    job: str


@pytest.fixture(scope="module")
def reading(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Reading]:
    """A finished docs-lift job with six reviewed trials."""
    require_browser()
    database = tmp_path_factory.mktemp("reading") / "examhall.db"
    server = serve(f"sqlite:///{database}", make_backend=lambda: FakeBackend(_worker))
    try:
        token = server.team_token("red")
        job = review_jobs.submit_review_job(server, token)
        with server.as_team(token) as red:
            sample = red.post(f"/v1/jobs/{job}/review-sample", json={"size": 6, "seed": 5})
            assert sample.status_code == 201, sample.text
            for entry in sample.json()["trials"]:
                verdict = "pass" if entry["outcome"] == "passed" else "fail"
                body = {"trial_id": entry["trial_id"], "verdict": verdict}
                posted = red.post(f"/v1/jobs/{job}/reviews", json=body)
                assert posted.status_code == 201, posted.text
        yield Reading(server, token, job)
    finally:
        server.stop()


def _api(reading: Reading, path: str) -> Any:
    with reading.server.as_team(reading.token) as red:
        response = red.get(path)
    assert response.status_code == 200, response.text
    return response.json()


def _at_width(browser: WebDriver, width: int) -> None:
    """The page laid out for a screen `width` CSS pixels wide (a phone's, when narrow)."""
    metrics = {"width": width, "height": 900, "deviceScaleFactor": 1, "mobile": width < 600}
    browser.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", metrics)
    browser.refresh()


def _overflow(browser: WebDriver) -> int:
    """How far the page is wider than its screen, in CSS pixels (0: it fits)."""
    script = "return document.documentElement.scrollWidth - window.innerWidth"
    return int(browser.execute_script(script))


def _both_widths(browser: WebDriver, name: str) -> None:
    """Screenshots at a desktop's width and a phone's; at either the page must not scroll
    sideways (a wide table scrolls inside its own box)."""
    try:
        for width in (DESKTOP, PHONE):
            _at_width(browser, width)
            assert _overflow(browser) <= 0, (name, width, _overflow(browser))
            screenshot(browser, f"/tmp/page-{name}-{width}.png")
    finally:
        browser.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})


def test_job_page_reads_comparison_grid_judges_then_agreement(
    reading: Reading, browser: WebDriver
) -> None:
    log_in(browser, reading.server, reading.token, f"/ui/jobs/{reading.job}")
    report = _api(reading, f"/v1/jobs/{reading.job}/report")
    assert [h.text for h in by_css(browser, "main h2")] == SECTIONS
    # The comparison comes before the grid, and the grid before any judge.
    order = browser.execute_script(
        "return [...document.querySelectorAll('section.comparison, table.grid, "
        "table.judges-matrix, table.agreement')].map(e => e.className)"
    )
    assert order == ["comparison", "grid", "judges-matrix", "agreement compact"]

    # The judges: one table, a row per judge, a column per variant.
    matrix = one(browser, "table.judges-matrix")
    variants = [v["name"] for v in report["variants"]]
    assert [th.text for th in by_css(matrix, "thead th.variant")] == variants
    rows = by_css(matrix, "tbody tr")
    judges = list(dict.fromkeys(j["name"] for v in report["variants"] for j in v["judges"]))
    assert sorted(judges) == sorted(JUDGES)
    assert [r.get_attribute("data-judge") for r in rows] == judges
    for row, name in zip(rows, judges, strict=True):
        cells = [td.text for td in by_css(row, "td")]
        for cell, variant in zip(cells, report["variants"], strict=True):
            (rate,) = [j for j in variant["judges"] if j["name"] == name]
            assert cell == f"{100 * rate['pass_rate']:.1f}% {rate['passed']}/{rate['scored']}"

    # The agreement: one compact table, a row per judge and variant as the report has them.
    agreement = report["agreement"]
    assert agreement["reviewed"] == 6
    table = one(browser, "table.agreement")
    shown = by_css(table, "tbody tr")
    assert [(r.get_attribute("data-judge"), r.get_attribute("data-variant")) for r in shown] == [
        (row["judge"] or "", row["variant"]) for row in agreement["rows"]
    ]
    assert len(by_css(table, "thead th")) == 6
    reasons = [li.text for li in by_css(browser, "ol.reasons li")]
    for element, row in zip(shown, agreement["rows"], strict=True):
        cells = [td.text for td in by_css(element, "td")]
        assert cells[2] == str(row["reviewed"])
        assert cells[3] == f"{100 * row['percent_agreement']:.1f}%"
        kappa = row["kappa"]
        if kappa["reason"]:  # said once, under the table, and pointed to
            assert cells[4].endswith(f" {reasons.index(kappa['reason']) + 1}")
    assert len(reasons) == len({r["kappa"]["reason"] for r in agreement["rows"]} - {None})
    # Compact: every row one line high, however long a reason or a judge's name.
    heights = [element.size["height"] for element in shown]
    assert max(heights) < 1.5 * min(heights), heights

    # No "SE 0.0 pp" beside a wide interval, wherever a rate is shown.
    for variant, element in zip(
        report["variants"], by_css(browser, "table.variants tbody tr"), strict=True
    ):
        for metric, cell in zip(
            ("pass_at_1", "pass_hat_k", "pass_at_k"), by_css(element, "td.metric"), strict=True
        ):
            data = variant[metric]
            if data["reason"]:
                assert "SE" not in cell.text and data["reason"] in cell.text
            else:
                assert f"SE {100 * data['stderr_clustered']:.1f} pp" in cell.text
    _both_widths(browser, "job")


def test_trial_page_shows_its_image_and_reads_text_artifacts_as_text(
    reading: Reading, browser: WebDriver
) -> None:
    trials = _api(reading, f"/v1/jobs/{reading.job}/trials")
    (trial,) = [t for t in trials if (t["case_id"], t["round"], t["variant"]) == WITH_ARTIFACTS]
    page = f"/ui/trials/{trial['id']}"
    log_in(browser, reading.server, reading.token, page)
    facts = {
        dt.text: dd.text
        for dt, dd in zip(by_css(browser, "dl.meta dt"), by_css(browser, "dl.meta dd"), strict=True)
    }
    # A trial of a suite without environments ran in the job's sandbox image.
    record = _api(reading, f"/v1/jobs/{reading.job}/report")["record"]
    assert trial["image"] is None
    assert facts["image"].startswith(f"{record['image']} the job's sandbox image")

    links = by_css(browser, "ul.artifacts li")
    assert {one(li, "a.artifact").text for li in links} == {*ARTIFACTS, "session.jsonl"}
    viewable = {v.get_attribute("data-artifact") for v in by_css(browser, "a.view")}
    assert viewable == READABLE  # not the binary one, nor the one past the cap
    listed = {one(li, "a.artifact").text: li.text for li in links}
    assert listed["blob.bin"] == "blob.bin 256 bytes (binary: download only)"
    assert (
        listed["big.log"]
        == f"big.log {VIEW_MAX_BYTES + 1:,} bytes (too large to view: download only)"
    )
    assert listed["notes.txt"] == f"notes.txt {len(ARTIFACTS['notes.txt'])} bytes view as text"

    with as_cookie(reading.server, reading.token) as red:
        for name in READABLE:
            response = red.get(f"{page}/artifacts/{name}")
            assert response.status_code == 200, name
            assert response.headers["content-type"] == "text/plain; charset=utf-8"
            assert response.headers["x-content-type-options"] == "nosniff"
            assert response.headers["content-security-policy"] == "sandbox; default-src 'none'"
        assert red.get(f"{page}/artifacts/notes.txt").text == "Résumé of the run: ok\n"
        download = f"/v1/trials/{trial['id']}/artifacts"
        for name, why in (("blob.bin", "not UTF-8 text"), ("big.log", "more than the")):
            refused = red.get(f"{page}/artifacts/{name}")
            assert refused.status_code == 406 and why in refused.text, name
            assert f"download it from {download}/{name}" in refused.text
            assert refused.headers["content-type"] == "text/plain; charset=utf-8"
            # The download still has every byte.
            assert red.get(f"{download}/{name}").content == ARTIFACTS[name]
        assert red.get(f"{page}/artifacts/nope.txt").status_code == 404
    with httpx.Client(base_url=reading.server.url) as anonymous:
        response = anonymous.get(f"{page}/artifacts/notes.txt")
        assert response.status_code == 303 and "/ui/login" in response.headers["location"]

    _both_widths(browser, "trial")

    # In the browser the HTML artifact is text: its markup shown, its script never run.
    one(browser, 'a.view[data-artifact="page.html"]').click()
    assert browser.current_url.endswith(f"{page}/artifacts/page.html")
    assert browser.execute_script("return document.contentType") == "text/plain"
    assert browser.title != "pwned"
    assert by_css(browser, "script") == [] and by_css(browser, "#pwned") == []
    assert one(browser, "body").text == PWNED
    screenshot(browser, "/tmp/page-artifact-html.png")


def test_artifact_view_answers_only_the_trials_team(reading: Reading) -> None:
    (trial, *_) = _api(reading, f"/v1/jobs/{reading.job}/trials")
    blue = reading.server.team_token("blue")
    with as_cookie(reading.server, blue) as other:
        response = other.get(f"/ui/trials/{trial['id']}/artifacts/session.jsonl")
    assert response.status_code == 404 and "Not found" in response.text
