"""Human review in headless Chromium: sign in, open a job's review queue, draw a sample,
review trials through the form, and find the reviews in the API and the report. The jobs
run on the fake backend (tests/review_jobs.py), so no sandbox is needed; everything else
(the control plane over HTTP, SQLite, the browser) is real."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from tests.review_jobs import Box, review_box, submit_review_job
from tests.web.conftest import require_browser
from tests.web.test_web_ui import as_cookie, by_css, is_stale, log_in, one, screenshot, wait_for

if TYPE_CHECKING:
    from selenium.webdriver.chrome.webdriver import WebDriver


@pytest.fixture(scope="module")
def box(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Box]:
    require_browser()
    yield from review_box(tmp_path_factory.mktemp("review-ui"))


def _api(box: Box, path: str, **params: Any) -> Any:
    with box.server.as_team(box.red) as red:
        response = red.get(path, params=params)
    assert response.status_code == 200, response.text
    return response.json()


def _submit(browser: WebDriver, selector: str) -> None:
    """Click a form's button and wait for the next page."""
    before = one(browser, "h1")
    one(browser, selector).click()
    wait_for(lambda: is_stale(before), what="the page after the form")


def test_review_through_the_browser_is_stored_and_reported(box: Box, browser: WebDriver) -> None:
    job_page = f"/ui/jobs/{box.job}"
    log_in(browser, box.server, box.red, job_page)
    # No review yet: the job page offers the queue and shows no agreement.
    assert by_css(browser, "section.agreement") == []
    assert "agreement" not in _api(box, f"/v1/jobs/{box.job}/report")
    one(browser, "p.review-link a").click()
    wait_for(lambda: browser.current_url.endswith(f"{job_page}/review"), what="the queue")
    assert by_css(browser, ".no-sample")

    size, seed = one(browser, "#size"), one(browser, "#seed")
    size.clear()
    size.send_keys("6")
    seed.clear()
    seed.send_keys("11")
    _submit(browser, "form.draw-sample button")
    sample = _api(box, f"/v1/jobs/{box.job}/review-sample")
    assert (sample["size"], sample["seed"]) == (6, 11)
    rows = by_css(browser, "table.queue tbody tr")
    assert [r.get_attribute("data-trial") for r in rows] == [
        t["trial_id"] for t in sample["trials"]
    ]
    assert all("not reviewed" in r.text for r in rows)
    # Blind by default: no verdict in the queue, and no agreement either.
    assert sample["blind"] is True
    assert all(one(r, "td.judged").text == "after your review" for r in rows)
    assert by_css(browser, "section.agreement") == [] and one(browser, ".agreement-elsewhere")
    screenshot(browser, "/tmp/examhall-web-review-queue.png")

    # The first sampled trial's review page: its artifacts and transcript, not its judges.
    first = sample["trials"][0]
    one(rows[0], "a.review-trial").click()
    wait_for(lambda: browser.current_url.endswith(f"/ui/trials/{first['trial_id']}/review"))
    trial = _api(box, f"/v1/trials/{first['trial_id']}")
    events = _api(box, f"/v1/trials/{first['trial_id']}/events")
    assert by_css(browser, "table.judges") == [] and by_css(browser, "a.trial-id") == []
    assert one(browser, "p.notice.blind")
    assert one(browser, 'a.artifact[download="session.jsonl"]')
    assert len(by_css(browser, "ol.transcript > li")) == len(events)

    # Saving without a verdict is refused and stores nothing.
    one(browser, "#note").send_keys("x.txt holds the wrong text")
    _submit(browser, "form.review button")
    assert "Choose pass or fail" in one(browser, "[role=alert]").text
    assert one(browser, "#note").get_attribute("value") == "x.txt holds the wrong text"
    assert _api(box, f"/v1/jobs/{box.job}/reviews") == []

    one(browser, 'input[name=verdict][value="fail"]').click()
    one(browser, "#reviewer").send_keys("ann")
    _submit(browser, "form.review button")
    # On to the next trial of the queue still to review.
    second = sample["trials"][1]
    assert browser.current_url.endswith(f"/ui/trials/{second['trial_id']}/review")
    (stored,) = _api(box, f"/v1/jobs/{box.job}/reviews")
    assert stored["trial_id"] == first["trial_id"] and stored["verdict"] == "fail"
    assert stored["note"] == "x.txt holds the wrong text" and stored["reviewer"] == "ann"
    assert (stored["team"], stored["via"]) == ("red", "web")
    assert stored["token_prefix"] == box.red[:12]

    # Reviewed, its verdict and judges are shown to this reviewer.
    browser.get(f"{box.server.url}/ui/trials/{first['trial_id']}/review")
    judges = one(browser, "table.judges").text
    assert all(j["name"] in judges and j["detail"] in judges for j in trial["judges"] or [])
    assert one(browser, "a.trial-id") and by_css(browser, "p.notice.blind") == []

    # The rest of the queue: people agree with each trial's verdict.
    outcomes = {t["id"]: t["outcome"] for t in _api(box, f"/v1/jobs/{box.job}/trials")}
    for entry in sample["trials"][1:]:
        browser.get(f"{box.server.url}/ui/trials/{entry['trial_id']}/review")
        verdict = "pass" if outcomes[entry["trial_id"]] == "passed" else "fail"
        one(browser, f'input[name=verdict][value="{verdict}"]').click()
        _submit(browser, "form.review button")
    assert browser.current_url.endswith(f"{job_page}/review")  # nothing left: the queue
    done = by_css(browser, "table.queue tbody tr")
    assert all("not reviewed" not in r.text for r in done)
    assert all(one(r, "td.judged").text != "after your review" for r in done)

    # A revision: the first trial again, now a pass; its history keeps both.
    browser.get(f"{box.server.url}/ui/trials/{first['trial_id']}/review")
    assert len(by_css(browser, "ol.reviews li")) == 1
    one(browser, 'input[name=verdict][value="pass"]').click()
    _submit(browser, "form.review button")
    history = _api(box, f"/v1/jobs/{box.job}/reviews", history=True)
    assert len(history) == len(sample["trials"]) + 1
    assert history[-1]["revises"] == stored["id"] and history[-1]["verdict"] == "pass"

    # The report: JSON, text and the job page agree on what was reviewed.
    report = _api(box, f"/v1/jobs/{box.job}/report")
    agreement = report["agreement"]
    assert agreement["reviewed"] == len(sample["trials"]) == agreement["sampled"]
    with box.server.as_team(box.red) as red:
        text = red.get(f"/v1/jobs/{box.job}/report", params={"format": "text"}).text
    assert f"Human review: {agreement['reviewed']} of {agreement['sampled']}" in text
    browser.get(f"{box.server.url}{job_page}")
    line = one(browser, "section.agreement p.sample-of-record")
    assert line.get_attribute("data-blind") == "true" and agreement["counted"] == line.text
    shown = by_css(browser, "section.agreement table.agreement tbody tr")
    assert [(r.get_attribute("data-judge"), r.get_attribute("data-variant")) for r in shown] == [
        (row["judge"] or "", row["variant"]) for row in agreement["rows"]
    ]
    for element, row in zip(shown, agreement["rows"], strict=True):
        cells = [td.text for td in by_css(element, "td")]
        assert cells[2] == str(row["reviewed"])
        assert cells[3] == f"{100 * row['percent_agreement']:.1f}%"
    (check,) = agreement["lift_checks"]
    assert check["finding"] in one(browser, "p.lift-check").text
    screenshot(browser, "/tmp/examhall-web-review-agreement.png")


def test_review_forms_refuse_other_sites_other_teams_and_bad_input(box: Box) -> None:
    with box.server.as_team(box.red) as red:
        body = {"size": 4, "seed": 2, "replace": True}
        sample = red.post(f"/v1/jobs/{box.job}/review-sample", json=body).json()
    trial_id = sample["trials"][0]["trial_id"]
    before = _api(box, f"/v1/jobs/{box.job}/reviews", history=True)
    form = {"verdict": "pass", "note": "n"}
    with as_cookie(box.server, box.red) as red:
        for headers in ({"Origin": "http://evil.example"}, {"Sec-Fetch-Site": "cross-site"}):
            refused = red.post(f"/ui/trials/{trial_id}/review", data=form, headers=headers)
            assert refused.status_code == 403 and "Refused" in refused.text, headers
        bad = red.post(f"/ui/jobs/{box.job}/review-sample", data={"size": "0", "seed": "1"})
        assert bad.status_code == 422 and "size" in bad.text
        words = red.post(f"/ui/jobs/{box.job}/review-sample", data={"size": "ten", "seed": "1"})
        assert words.status_code == 422 and "whole numbers" in words.text
        for odd in ("\u00b2", "\u2460", "1" * 12):  # "²" and "①" pass str.isdigit
            sized = red.post(f"/ui/jobs/{box.job}/review-sample", data={"size": odd, "seed": "1"})
            assert sized.status_code == 422 and "whole numbers" in sized.text, odd
            seeded = red.post(f"/ui/jobs/{box.job}/review-sample", data={"size": "3", "seed": odd})
            assert seeded.status_code == 422 and "whole numbers" in seeded.text, odd
        nul = red.post(f"/ui/trials/{trial_id}/review", data={**form, "note": "a\x00b"})
        assert nul.status_code == 422 and "U+0000" in nul.text
    with as_cookie(box.server, box.blue) as blue:
        for response in (
            blue.get(f"/ui/jobs/{box.job}/review"),
            blue.get(f"/ui/trials/{trial_id}/review"),
            blue.post(f"/ui/trials/{trial_id}/review", data=form),
            blue.post(f"/ui/jobs/{box.job}/review-sample", data={"size": "3", "seed": "1"}),
        ):
            assert response.status_code == 404 and "Not found" in response.text
    assert _api(box, f"/v1/jobs/{box.job}/reviews", history=True) == before
    assert _api(box, f"/v1/jobs/{box.job}/review-sample")["id"] == sample["id"]


def test_the_review_pages_need_a_signed_in_browser(box: Box) -> None:
    with httpx.Client(base_url=box.server.url) as anonymous:
        response = anonymous.get(f"/ui/jobs/{box.job}/review")
    assert response.status_code == 303
    assert response.headers["location"] == f"/ui/login?next=/ui/jobs/{box.job}/review"


# What only the judges' verdicts put on a page of the fake backend's trials
# (tests/review_jobs.py): their details and names, the outcome badges, the error's kind.
VERDICT_MARKS = (
    "x.txt is 'ok'",
    "no x.txt",
    "an answer was given",
    "answer_given",
    'class="badge passed"',
    'class="badge failed"',
    'class="badge error"',
    "agent_error",
)


def _marks(page: str) -> list[str]:
    return [mark for mark in VERDICT_MARKS if mark in page]


def test_blind_pages_show_no_verdict_nor_a_link_to_one_until_the_review_is_saved(
    box: Box,
) -> None:
    job = submit_review_job(box.server, box.red)
    trials = {t["id"]: t for t in _api(box, f"/v1/jobs/{job}/trials")}
    with as_cookie(box.server, box.red) as red:
        drawn = red.post(f"/ui/jobs/{job}/review-sample", data={"size": "40", "seed": "1"})
        assert drawn.status_code == 303, drawn.text
        sample = red.get(f"/v1/jobs/{job}/review-sample").json()
        ids = [t["trial_id"] for t in sample["trials"]]
        # Every trial but the unscored sandbox_error; the agent_error among them.
        assert sample["blind"] is True and len(ids) == len(trials) - 1
        assert "agent_error" in {trials[t]["error_kind"] for t in ids}
        assert all(t["outcome"] is None for t in sample["trials"])
        queue = red.get(f"/ui/jobs/{job}/review").text
        assert _marks(queue) == [] and f'href="/ui/jobs/{job}"' not in queue
        assert "agreement-elsewhere" in queue
        pages = {trial_id: red.get(f"/ui/trials/{trial_id}/review").text for trial_id in ids}
        for trial_id, page in pages.items():
            assert _marks(page) == [], (trial_id, _marks(page))
            assert f'href="/ui/trials/{trial_id}"' not in page
            assert f'href="/ui/jobs/{job}"' not in page and "session.jsonl" in page
        reviewed = next(t for t in ids if trials[t]["outcome"] == "failed")
        saved = red.post(f"/ui/trials/{reviewed}/review", data={"verdict": "pass"})
        assert saved.status_code == 303, saved.text
        after = red.get(f"/ui/trials/{reviewed}/review").text
        queue = red.get(f"/ui/jobs/{job}/review").text
        rows = {
            trial_id: queue.split(f'data-trial="{trial_id}"', 1)[1].split("</tr>", 1)[0]
            for trial_id in ids
        }
    # Saved, the reviewer sees the trial's verdict, judges and page; the others stay hidden.
    assert {"no x.txt", "answer_given", 'class="badge failed"'} <= set(_marks(after))
    assert f'href="/ui/trials/{reviewed}"' in after
    assert 'class="badge failed"' in rows[reviewed]
    assert all(_marks(row) == [] for trial_id, row in rows.items() if trial_id != reviewed)


def test_a_redraw_in_the_form_needs_its_box_and_an_open_sample_shows_verdicts(box: Box) -> None:
    job = submit_review_job(box.server, box.red)
    with as_cookie(box.server, box.red) as red:
        first = red.post(f"/ui/jobs/{job}/review-sample", data={"size": "4", "seed": "1"})
        assert first.status_code == 303, first.text
        sample = red.get(f"/v1/jobs/{job}/review-sample").json()
        trial_id = sample["trials"][0]["trial_id"]
        assert red.post(f"/ui/trials/{trial_id}/review", data={"verdict": "pass"}).is_redirect
        sample = red.get(f"/v1/jobs/{job}/review-sample").json()
        again = {"size": "40", "seed": "2", "visibility": "open"}
        refused = red.post(f"/ui/jobs/{job}/review-sample", data=again)
        assert refused.status_code == 409 and "tick the box" in refused.text
        assert sample["id"] in refused.text and 'value="open" checked' in refused.text
        assert red.get(f"/v1/jobs/{job}/review-sample").json() == sample
        replaced = red.post(f"/ui/jobs/{job}/review-sample", data={**again, "replace": "yes"})
        assert replaced.status_code == 303, replaced.text
        new = red.get(f"/v1/jobs/{job}/review-sample").json()
        queue = red.get(f"/ui/jobs/{job}/review").text
        errored = next(t for t in new["trials"] if t["outcome"] == "error")
        page = red.get(f"/ui/trials/{errored['trial_id']}/review").text
        assert red.post(
            f"/ui/trials/{errored['trial_id']}/review", data={"verdict": "fail"}
        ).is_redirect
        job_page = red.get(f"/ui/jobs/{job}").text
    assert new["id"] != sample["id"] and new["blind"] is False
    assert all(t["verdict_shown"] for t in new["trials"])
    assert 'class="badge passed"' in queue and 'class="badge failed"' in queue
    # The scored error is in the sample, shown for what it is, and reviewable.
    assert errored["error_kind"] == "agent_error" and "agent_error" in page
    assert 'name="verdict"' in page
    line = job_page.split('class="sample-of-record"', 1)[1].split("</p>", 1)[0]
    assert 'data-blind="false"' in line and 'data-retired-reviews="1"' in line
    assert "1 review(s) made in 1 retired sample(s) are kept but not counted" in line
