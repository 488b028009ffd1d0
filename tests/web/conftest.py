"""Fixtures for the web UI tests: one control plane and a few finished jobs per module, and a
headless Chromium driven by Selenium.

Chromium and its driver come from Debian (`apt-get install chromium chromium-driver`); the
driver's path is given explicitly so Selenium Manager never tries to download one. In CI a
missing browser fails the tests: a UI suite that quietly skips proves nothing.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tests.docker.conftest import Server, serve

if TYPE_CHECKING:
    from selenium.webdriver.chrome.webdriver import WebDriver

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"

EVIL = '<script>document.title="pwned"</script>'
# A suite whose case id, prompt, tool arguments and answer all carry a script tag: the UI
# must show each as text.
EVIL_SUITE = {
    "name": "evil",
    "source": f"""
from sandbox import faux, judges
from sandbox.suite import Case

EVIL = {EVIL!r}
CASES = [
    Case(
        id=EVIL,
        input="Write " + EVIL + " to x.txt",
        judges=[judges.file_equals("x.txt", EVIL)],
        scripts={{
            "solution": [
                faux.call("write", path="x.txt", content=EVIL),
                faux.text("Wrote " + EVIL),
            ]
        }},
    )
]
""",
}

SMOKE: dict[str, Any] = {
    "suite": "smoke",
    "model": {"provider": "simulated", "id": "coin?p=0.5"},
    "rounds": 2,
    "seed": 7,
}
DOCS_LIFT: dict[str, Any] = {
    "suite": "docs_lift_demo",
    "cases": ["write-ledger", "add-trailer"],
    "model": {"provider": "faux", "id": "informed"},
    "comparison": "docs-lift",
    "docs": "docs_lift_demo",
    "rounds": 2,
}


def require_browser() -> None:
    missing = [path for path in (CHROMIUM, CHROMEDRIVER) if shutil.which(path) is None]
    try:
        import selenium  # noqa: F401
    except ImportError:
        missing.append("selenium (pip install -e '.[dev]')")
    if not missing:
        return
    message = (
        f"the browser tests need {', '.join(missing)}; "
        "install with: apt-get install -y chromium chromium-driver"
    )
    if os.environ.get("CI") == "true":
        pytest.fail(message)
    pytest.skip(message)


@pytest.fixture(scope="module")
def web_server(tmp_path_factory: pytest.TempPathFactory, sandbox_image: str) -> Iterator[Server]:
    """One control plane for a module's tests (start_server's, with a longer life)."""
    require_browser()  # before the jobs run, so a box without a browser skips at once
    server = serve(f"sqlite:///{tmp_path_factory.mktemp('web') / 'examhall.db'}")
    yield server
    server.stop()


@dataclass
class Jobs:
    red: str  # team red's token
    blue: str  # team blue's token
    smoke: str  # red's
    docs_lift: str  # red's
    evil: str  # blue's


def submit_as(server: Server, token: str, body: dict[str, Any]) -> str:
    with server.as_team(token) as client:
        response = client.post("/v1/jobs", json=body)
    assert response.status_code == 201, response.text
    job_id: str = response.json()["id"]
    return job_id


@pytest.fixture(scope="module")
def jobs(web_server: Server) -> Jobs:
    red, blue = web_server.team_token("red"), web_server.team_token("blue")
    found = Jobs(
        red=red,
        blue=blue,
        smoke=submit_as(web_server, red, SMOKE),
        docs_lift=submit_as(web_server, red, DOCS_LIFT),
        evil=submit_as(
            web_server, blue, {"suite": EVIL_SUITE, "model": {"provider": "faux", "id": "solution"}}
        ),
    )
    for job_id in (found.smoke, found.docs_lift, found.evil):
        assert web_server.wait(job_id)["status"] == "finished"
    return found


@pytest.fixture(scope="module")
def downloads(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("downloads")


@pytest.fixture(scope="module")
def browser(downloads: Path) -> Iterator[WebDriver]:
    require_browser()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in (
        "--headless=new",
        "--no-sandbox",  # tests run as root
        "--disable-dev-shm-usage",
        "--window-size=1280,1000",
    ):
        options.add_argument(argument)
    options.add_experimental_option(
        "prefs",
        {"download.default_directory": str(downloads), "download.prompt_for_download": False},
    )
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()
