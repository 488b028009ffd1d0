"""The web UI in headless Chromium, against a real control plane with real jobs in Docker.

Every check compares what the browser shows with what the JSON API says about the same
job, so the pages cannot drift from the data.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import docker
import httpx
import pytest

from service.api.sessions import SESSION_COOKIE as COOKIE
from service.backends.docker import LABEL_JOB
from service.web.charts import LEFT, PLOT
from tests.docker.conftest import Server
from tests.web.conftest import DOCS_LIFT, EVIL, Jobs, submit_as

if TYPE_CHECKING:
    from selenium.webdriver.chrome.webdriver import WebDriver
    from selenium.webdriver.remote.webelement import WebElement

pytestmark = pytest.mark.docker

# The cells' background colours (service/web/templates/style.css), as the browser reports them.
COLOURS = {
    "passed": "rgba(46, 125, 50, 1)",
    "failed": "rgba(198, 40, 40, 1)",
    "error": "rgba(239, 108, 0, 1)",
    "missing": "rgba(238, 238, 238, 1)",
}


def by_css(root: WebDriver | WebElement, selector: str) -> list[WebElement]:
    from selenium.webdriver.common.by import By

    return root.find_elements(By.CSS_SELECTOR, selector)


def one(root: WebDriver | WebElement, selector: str) -> WebElement:
    found = by_css(root, selector)
    assert len(found) == 1, (selector, len(found))
    return found[0]


def meta(driver: WebDriver) -> dict[str, str]:
    """A page's header facts: label -> text."""
    labels = by_css(driver, "dl.meta dt")
    values = by_css(driver, "dl.meta dd")
    return {dt.text: dd.text for dt, dd in zip(labels, values, strict=True)}


def screenshot(driver: WebDriver, path: str) -> None:
    """The whole page, not just the window, for a person to look at after the run."""
    import base64

    size = driver.execute_cdp_cmd("Page.getLayoutMetrics", {})["cssContentSize"]
    shot = driver.execute_cdp_cmd(
        "Page.captureScreenshot",
        {
            "captureBeyondViewport": True,
            "clip": {"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1},
        },
    )
    Path(path).write_bytes(base64.b64decode(shot["data"]))


def is_stale(element: WebElement) -> bool:
    from selenium.common.exceptions import StaleElementReferenceException, WebDriverException

    try:
        element.tag_name  # noqa: B018 - any access tells whether the page was replaced
    except StaleElementReferenceException:
        return True
    except WebDriverException as exc:
        # Asked while the old document is being torn down, Chromium answers this instead.
        if "does not belong to the document" in str(exc):
            return True
        raise
    return False


def wait_for(condition: Callable[[], bool], timeout: float = 30.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def log_in(driver: WebDriver, server: Server, token: str, page: str = "/ui/jobs") -> None:
    """Through the form, as a person would: the login page first, then where they were."""
    driver.delete_all_cookies()
    driver.get(server.url + page)
    assert "/ui/login" in driver.current_url
    one(driver, "#token").send_keys(token)
    one(driver, "form.login button[type=submit]").click()
    wait_for(lambda: "/ui/login" not in driver.current_url, what="the login redirect")
    assert driver.current_url == server.url + page


def api(server: Server, token: str) -> httpx.Client:
    return server.as_team(token)


def as_cookie(server: Server, token: str) -> httpx.Client:
    """A client signed in as the browser is: with a session cookie, not the token."""
    signed_in = httpx.post(f"{server.url}/ui/login", data={"token": token})
    assert signed_in.status_code == 303 and COOKIE in signed_in.cookies
    return httpx.Client(base_url=server.url, timeout=60, cookies=signed_in.cookies)


def latest_attempts(trials: list[dict[str, Any]]) -> dict[tuple[str, str, int], dict[str, Any]]:
    latest: dict[tuple[str, str, int], dict[str, Any]] = {}
    for t in trials:
        key = (t["case_id"], t["variant"], t["round"])
        if key not in latest or t["attempt"] > latest[key]["attempt"]:
            latest[key] = t
    return latest


def check_chart(driver: WebDriver, report: dict[str, Any]) -> None:
    metrics = ["pass_at_1"] if report["k"] == 1 else ["pass_at_1", "pass_hat_k"]
    drawn = {
        (g.get_attribute("data-variant"), g.get_attribute("data-metric")): g
        for g in by_css(driver, "svg.chart g.metric")
    }
    assert set(drawn) == {(v["name"], m) for v in report["variants"] for m in metrics}
    for variant in report["variants"]:
        for metric in metrics:
            data, g = variant[metric], drawn[(variant["name"], metric)]
            if data["value"] is None:
                assert by_css(g, "circle.point") == []
                assert data["reason"] in g.text
                continue
            assert float(g.get_attribute("data-value") or "nan") == data["value"]
            point = one(g, "circle.point")
            assert abs(float(point.get_attribute("cx") or 0) - (LEFT + data["value"] * PLOT)) < 0.2
            lines = by_css(g, "line.interval")
            if data["ci95"] is None:
                assert lines == [] and f"no interval: {data['reason']}" in g.text
                continue
            (line,) = lines  # one interval per variant and metric
            low, high = data["ci95"]
            assert float(g.get_attribute("data-low") or "nan") == low
            assert float(g.get_attribute("data-high") or "nan") == high
            assert abs(float(line.get_attribute("x1") or 0) - (LEFT + low * PLOT)) < 0.2
            assert abs(float(line.get_attribute("x2") or 0) - (LEFT + high * PLOT)) < 0.2


def check_grid(driver: WebDriver, job: dict[str, Any], trials: list[dict[str, Any]]) -> None:
    spec = job["spec"]
    variants = spec.get("arms") or list(spec["variants"])
    cells = by_css(driver, "table.grid td.cell")
    assert len(cells) == len(spec["cases"]) * spec["rounds"] * len(variants)
    latest = latest_attempts(trials)
    seen = set()
    for cell in cells:
        key = (
            cell.get_attribute("data-case") or "",
            cell.get_attribute("data-variant") or "",
            int(cell.get_attribute("data-round") or 0),
        )
        seen.add(key)
        trial = latest.get(key)
        state = "missing" if trial is None else (trial["outcome"] or trial["status"])
        assert cell.get_attribute("data-outcome") == state, key
        assert state in (cell.get_attribute("class") or "").split()
        assert f"round {key[2]}: {state}" in (cell.get_attribute("title") or "")
        if state in COLOURS:
            assert cell.value_of_css_property("background-color") == COLOURS[state], key
        if trial is not None:
            assert cell.get_attribute("data-trial") == trial["id"]
            link = one(cell, "a").get_attribute("href")
            assert link is not None and link.endswith(f"/ui/trials/{trial['id']}")
    assert len(seen) == len(cells)
    legend = one(driver, "ul.legend").text
    assert all(word in legend for word in ("passed", "failed", "error", "queued", "running"))


# ----- signing in ---------------------------------------------------------------------


def test_logged_out_pages_redirect_to_the_login_form(
    web_server: Server, jobs: Jobs, browser: WebDriver
) -> None:
    with httpx.Client(base_url=web_server.url, timeout=60) as anonymous:
        root = anonymous.get("/")
        assert root.status_code == 303 and root.headers["location"] == "/ui/jobs"
        for path in ("/ui/jobs", f"/ui/jobs/{jobs.smoke}", "/ui/trials/trial-x"):
            response = anonymous.get(path)
            assert response.status_code == 303, path
            assert response.headers["location"] == f"/ui/login?next={path}"
        wrong = anonymous.post("/ui/login", data={"token": "exh_wrong"})
        assert wrong.status_code == 401 and "unknown or revoked" in wrong.text
        assert COOKIE not in wrong.cookies
        # The form cannot be used to send a browser elsewhere after login.
        offsite = anonymous.post(
            "/ui/login", data={"token": jobs.red, "next": "//evil.example/ui/x"}
        )
        assert offsite.status_code == 303 and offsite.headers["location"] == "/ui/jobs"
        cookie = offsite.headers["set-cookie"].lower()
        assert all(part in cookie for part in ("httponly", "samesite=strict", "path=/"))

    browser.delete_all_cookies()
    browser.get(f"{web_server.url}/ui/jobs/{jobs.smoke}")
    assert browser.current_url == f"{web_server.url}/ui/login?next=/ui/jobs/{jobs.smoke}"
    one(browser, "#token").send_keys("exh_not_a_token")
    one(browser, "form.login button[type=submit]").click()
    wait_for(lambda: bool(by_css(browser, "[role=alert]")), what="the login error")
    assert "unknown or revoked" in one(browser, "[role=alert]").text
    # The right token lands on the page that was asked for.
    one(browser, "#token").send_keys(jobs.red)
    one(browser, "form.login button[type=submit]").click()
    wait_for(lambda: browser.current_url.endswith(f"/ui/jobs/{jobs.smoke}"), what="the job page")
    # Signing out drops the cookie: the next page asks for the token again.
    one(browser, "header.top form button").click()
    wait_for(lambda: "/ui/login" in browser.current_url, what="the login page")
    browser.get(f"{web_server.url}/ui/jobs")
    assert "/ui/login" in browser.current_url


def test_ui_routes_stay_out_of_the_openapi_schema(web_server: Server) -> None:
    paths = web_server.http.get("/openapi.json").json()["paths"]
    assert not [p for p in paths if p == "/" or p.startswith("/ui")]


# ----- the jobs list and a job --------------------------------------------------------


def test_jobs_list_shows_the_teams_jobs_only(
    web_server: Server, jobs: Jobs, browser: WebDriver
) -> None:
    log_in(browser, web_server, jobs.red)
    with api(web_server, jobs.red) as red:
        listed = {j["id"]: j for j in red.get("/v1/jobs").json()}
    rows = by_css(browser, "table.jobs tbody tr")
    shown = {one(row, "td a").text: row for row in rows}
    assert set(shown) == set(listed) == {jobs.smoke, jobs.docs_lift}
    for job_id, row in shown.items():
        job = listed[job_id]
        assert job["suite"] in row.text and job["status"] in row.text
        assert f"{job['counts']['finished']}/{job['planned_trials']}" in row.text
    assert "signed in as red" in one(browser, "header.top").text
    one(browser, f'a[href="/ui/jobs/{jobs.smoke}"]').click()
    wait_for(lambda: browser.current_url.endswith(f"/ui/jobs/{jobs.smoke}"), what="job page")


def test_job_page_chart_table_and_grid_match_the_api(
    web_server: Server, jobs: Jobs, browser: WebDriver
) -> None:
    log_in(browser, web_server, jobs.red, f"/ui/jobs/{jobs.smoke}")
    with api(web_server, jobs.red) as red:
        job = red.get(f"/v1/jobs/{jobs.smoke}").json()
        report = red.get(f"/v1/jobs/{jobs.smoke}/report").json()
        trials = red.get(f"/v1/jobs/{jobs.smoke}/trials").json()
    header = meta(browser)
    assert header["status"] == "finished" and header["team"] == "red"
    assert header["suite"].startswith("smoke ")
    assert header["model"] == "simulated/coin?p=0.5"
    assert header["trials"].startswith("8/8 finished")
    # A finished job does not reload itself and cannot be cancelled.
    assert by_css(browser, 'meta[http-equiv="refresh"]') == []
    assert by_css(browser, "form.cancel") == []

    check_chart(browser, report)
    (variant,) = report["variants"]
    row = one(browser, "table.variants tbody tr").text
    for metric in ("pass_at_1", "pass_hat_k", "pass_at_k"):
        value = variant[metric]["value"]
        assert (f"{100 * value:.1f}%" if value is not None else "n/a") in row, metric
    if variant["pass_at_1"]["ci95"]:
        low, high = variant["pass_at_1"]["ci95"]
        assert f"[{100 * low:.1f}, {100 * high:.1f}]" in row
    check_grid(browser, job, trials)
    outcomes = {t["outcome"] for t in trials}
    assert outcomes == {"passed", "failed"}, "p=0.5 and this seed should give both"

    screenshot(browser, "/tmp/examhall-web-job.png")


def test_docs_lift_page_shows_the_lift_flags_and_pairs(
    web_server: Server, jobs: Jobs, browser: WebDriver
) -> None:
    log_in(browser, web_server, jobs.red, f"/ui/jobs/{jobs.docs_lift}")
    with api(web_server, jobs.red) as red:
        job = red.get(f"/v1/jobs/{jobs.docs_lift}").json()
        report = red.get(f"/v1/jobs/{jobs.docs_lift}/report").json()
        trials = red.get(f"/v1/jobs/{jobs.docs_lift}/trials").json()
    check_chart(browser, report)
    assert len(by_css(browser, "svg.chart line.interval")) >= len(report["variants"])
    check_grid(browser, job, trials)

    (comparison,) = report["comparisons"]
    section = one(browser, "section.comparison")
    assert section.get_attribute("data-candidate") == "with_docs"
    head = comparison["headline"]
    assert one(section, ".lift").text == f"{head['lift_pp']:+.1f} pp"
    low, high = head["lift_ci95_pp"]
    assert f"[95% CI {low:+.1f} to {high:+.1f} pp]" in section.text
    assert f"{comparison['pairs_eligible']}/{comparison['pairs_total']}" in section.text
    assert f"{head['wins']} / {head['ties']} / {head['losses']}" in section.text
    flags = [f.text for f in by_css(section, ".flags .flag")]
    assert flags == comparison["flags"]
    assert comparison["blocked"] == [] and by_css(section, ".blocked-none")
    screenshot(browser, "/tmp/examhall-web-docs-lift.png")


def test_cancel_button_cancels_and_the_page_shows_the_blocked_pairs(
    web_server: Server, jobs: Jobs, browser: WebDriver, docker_client: docker.DockerClient
) -> None:
    job_id = submit_as(web_server, jobs.red, {**DOCS_LIFT, "rounds": 5})
    log_in(browser, web_server, jobs.red, f"/ui/jobs/{job_id}")
    # While work is outstanding the page refreshes itself.
    assert by_css(browser, 'meta[http-equiv="refresh"]')
    before = one(browser, "h1")
    one(browser, "form.cancel button").click()
    wait_for(lambda: is_stale(before), what="the page after the cancel")
    assert browser.current_url == f"{web_server.url}/ui/jobs/{job_id}"
    assert meta(browser)["status"] == "cancelled"

    with api(web_server, jobs.red) as red:
        wait_for(
            lambda: red.get(f"/v1/jobs/{job_id}").json()["counts"]["running"] == 0,
            timeout=60,
            what="the running trials to stop",
        )
        job = red.get(f"/v1/jobs/{job_id}").json()
        report = red.get(f"/v1/jobs/{job_id}/report").json()
        trials = red.get(f"/v1/jobs/{job_id}/trials").json()
    wait_for(
        # sparse: no inspect of each, which races with the containers' removal
        lambda: (
            not docker_client.containers.list(
                all=True, sparse=True, filters={"label": f"{LABEL_JOB}={job_id}"}
            )
        ),
        timeout=60,
        what="the cancelled job's containers to go",
    )
    assert job["status"] == "cancelled"
    browser.get(f"{web_server.url}/ui/jobs/{job_id}")
    assert by_css(browser, "form.cancel") == []
    (comparison,) = report["comparisons"]
    assert comparison["headline"] is None and comparison["blocked"]
    section = one(browser, "section.comparison")
    assert comparison["withheld_reason"] in one(section, ".withheld").text
    rows = by_css(section, "table.blocked tbody tr")
    assert [r.text for r in rows] == [
        f"{b['case']} {b['round']} {'; '.join(b['reasons'])}" for b in comparison["blocked"]
    ]
    check_grid(browser, job, trials)
    assert by_css(browser, "td.cell.missing")
    screenshot(browser, "/tmp/examhall-web-cancelled.png")


# ----- a trial ------------------------------------------------------------------------


def test_trial_page_shows_the_transcript_and_downloads_artifacts(
    web_server: Server, jobs: Jobs, browser: WebDriver, downloads: Path
) -> None:
    log_in(browser, web_server, jobs.red, f"/ui/jobs/{jobs.smoke}")
    with api(web_server, jobs.red) as red:
        trials = red.get(f"/v1/jobs/{jobs.smoke}/trials").json()
        # The one with the most tool calls shows the most of the transcript.
        trial = max(trials, key=lambda t: (t["outcome"] == "passed", t["tool_calls"] or 0))
        events = red.get(f"/v1/trials/{trial['id']}/events").json()
        session = red.get(f"/v1/trials/{trial['id']}/artifacts/session.jsonl").content
    one(browser, f'td.cell[data-trial="{trial["id"]}"] a').click()
    wait_for(lambda: browser.current_url.endswith(f"/ui/trials/{trial['id']}"), what="trial")

    facts = meta(browser)
    assert facts["case"] == trial["case_id"] and facts["variant"] == trial["variant"]
    assert facts["round"] == str(trial["round"]) and facts["attempt"] == str(trial["attempt"])
    assert facts["outcome"] == trial["outcome"] and facts["job"].startswith(jobs.smoke)
    assert facts["tool calls"] == str(trial["tool_calls"])
    judges = one(browser, "table.judges").text
    assert all(j["name"] in judges for j in trial["judges"])

    items = by_css(browser, "ol.transcript > li")
    assert len(items) == len(events) and events
    assert {e["type"] for e in events} >= {"message", "tool_call", "tool_result"}
    for item, event in zip(items, events, strict=True):
        payload, text = event["payload"], item.text
        assert item.get_attribute("data-type") == event["type"]
        if event["type"] == "message":
            assert payload["role"] in text
            assert payload["content"].strip() in text
        elif event["type"] == "tool_call":
            assert payload["name"] in text
            for value in payload["arguments"].values():
                assert json.dumps(value, ensure_ascii=False) in text
        elif event["type"] == "tool_result":
            assert payload["name"] in text and payload["content"].strip() in text

    # The link is the API's artifact route; the browser's cookie is enough for it.
    link = one(browser, 'a.artifact[download="session.jsonl"]')
    assert link.get_attribute("href") == (
        f"{web_server.url}/v1/trials/{trial['id']}/artifacts/session.jsonl"
    )
    link.click()
    target = downloads / "session.jsonl"
    wait_for(target.exists, what="the download")
    wait_for(lambda: target.read_bytes() == session, what="the whole download")
    screenshot(browser, "/tmp/examhall-web-trial.png")


# ----- isolation and escaping ---------------------------------------------------------


def test_another_teams_job_and_trials_are_not_found(
    web_server: Server, jobs: Jobs, browser: WebDriver
) -> None:
    with api(web_server, jobs.blue) as blue:
        (evil_trial,) = blue.get(f"/v1/jobs/{jobs.evil}/trials").json()
    with as_cookie(web_server, jobs.red) as red:
        for path in (f"/ui/jobs/{jobs.evil}", f"/ui/trials/{evil_trial['id']}"):
            response = red.get(path)
            assert response.status_code == 404, path
            assert "Not found" in response.text and "&lt;script" not in response.text
        # Same answer as a job that does not exist.
        assert red.get("/ui/jobs/job-nope").status_code == 404
    log_in(browser, web_server, jobs.red)
    browser.get(f"{web_server.url}/ui/jobs/{jobs.evil}")
    assert one(browser, "h1").text == "Not found"
    assert by_css(browser, "table.grid") == []


def test_script_in_a_case_id_and_transcript_is_shown_as_text(
    web_server: Server, jobs: Jobs, browser: WebDriver
) -> None:
    with as_cookie(web_server, jobs.blue) as blue:
        page = blue.get(f"/ui/jobs/{jobs.evil}")
        assert "script-src" not in page.headers["content-security-policy"]
        assert "default-src 'none'" in page.headers["content-security-policy"]
        assert EVIL not in page.text and "&lt;script&gt;" in page.text
    log_in(browser, web_server, jobs.blue, f"/ui/jobs/{jobs.evil}")
    assert browser.title != "pwned"
    assert by_css(browser, "script") == []
    assert one(browser, "table.grid th.case").text == EVIL
    check_chart(
        browser, web_server.http.get(f"/v1/jobs/{jobs.evil}/report").json()
    )  # one case: pass@1 without an interval, and the reason in words

    one(browser, "table.grid td.cell a").click()
    wait_for(lambda: "/ui/trials/" in browser.current_url, what="the trial page")
    assert by_css(browser, "script") == [] and browser.title != "pwned"
    assert one(browser, ".case-id").text == EVIL
    transcript = one(browser, "ol.transcript").text
    assert f"Write {EVIL} to x.txt" in transcript  # the prompt
    assert json.dumps(EVIL) in transcript  # the tool call's argument
    assert f"Wrote {EVIL}" in transcript  # the answer
    screenshot(browser, "/tmp/examhall-web-evil-trial.png")
