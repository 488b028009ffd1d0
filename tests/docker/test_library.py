"""The library (`from examhall import Client, AsyncClient`) against a live control plane:
real HTTP, real Docker, the smoke suite with the simulated model."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from examhall import (
    ApiError,
    AsyncClient,
    Client,
    EventView,
    JobCreated,
    JobRequest,
    JobView,
    Report,
    ReviewView,
    StreamEvent,
    TrialView,
)
from service.report.model import report_json
from service.suites.archives import archive_id, pack_directory
from tests.api.test_suites import harbor_tree
from tests.docker.conftest import Server, serve

pytestmark = pytest.mark.docker

ROOT = Path(__file__).resolve().parents[2]
SMOKE_CASES = 4
COIN = "simulated/coin?p=0.5"


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory, sandbox_image: str) -> Iterator[Server]:
    """One control plane for the module's tests (each job of theirs is their own)."""
    database = tmp_path_factory.mktemp("library") / "examhall.db"
    server = serve(f"sqlite:///{database}", max_containers=2)
    yield server
    server.stop()


@pytest.fixture
def client(live: Server) -> Iterator[Client]:
    with Client(live.url, live.token) as opened:
        yield opened


@pytest.fixture(scope="module")
def finished(live: Server) -> JobView:
    """A smoke job of two rounds, submitted and waited for through the library."""
    with Client(live.url, live.token) as client:
        job = client.submit(suite="smoke", model=COIN, rounds=2, seed=5)
        return client.wait(job.id)


def cancel_and_settle(client: Client, job_id: str) -> JobView:
    """Cancel a job through the library, then wait until its running trials were stopped,
    so that none outlives the test."""
    cancelled = client.cancel(job_id)
    assert client.wait(job_id).status == "cancelled"
    deadline = time.monotonic() + 60
    while any(t.status != "finished" for t in client.trials(job_id)):
        assert time.monotonic() < deadline, f"the trials of cancelled job {job_id} ran on"
        time.sleep(0.2)
    return cancelled


def test_submit_takes_a_body_keywords_or_both(client: Client, live: Server) -> None:
    body = {"suite": "smoke", "model": {"provider": "simulated", "id": "coin"}, "rounds": 1}
    as_body = client.submit(body)
    as_model = client.submit(JobRequest.model_validate(body))
    # Keywords go on top of the body; "PROVIDER/MODEL" names the model.
    as_keywords = client.submit(body, rounds=2, model="simulated/coin?p=0.9")
    for created in (as_body, as_model, as_keywords):
        assert isinstance(created, JobCreated)
        assert cancel_and_settle(client, created.id).status == "cancelled"
    assert (as_body.planned_trials, as_model.planned_trials) == (SMOKE_CASES, SMOKE_CASES)
    assert as_keywords.planned_trials == 2 * SMOKE_CASES
    spec = live.http.get(f"/v1/jobs/{as_keywords.id}").json()["spec"]
    assert spec["model"] == {"provider": "simulated", "id": "coin?p=0.9"} and spec["rounds"] == 2


def test_follow_streams_the_jobs_events_to_its_end(client: Client) -> None:
    job = client.submit(suite="smoke", model=COIN, cases=["fix-config"], rounds=2)
    events = list(client.follow(job.id))
    assert all(isinstance(event, StreamEvent) for event in events)
    assert events[-1] == StreamEvent("end", {"status": "finished"})
    finished = {
        e.data["id"] for e in events if e.event == "trial" and e.data["status"] == "finished"
    }
    assert finished == {trial.id for trial in client.trials(job.id)}
    assert [e.data["finished"] for e in events if e.event == "counts"][-1] == 2
    # Waiting on a job that ended answers at once, with the job as it ended.
    done = client.wait(job.id)
    assert isinstance(done, JobView) and done.status == "finished" and done.counts.finished == 2


def test_the_report_as_a_model_as_text_and_as_html(
    client: Client, live: Server, finished: JobView
) -> None:
    report = client.report(finished.id)
    assert isinstance(report, Report)
    assert report.job == finished.id and report.k == 2
    assert report.variants[0].scored_trials == finished.planned_trials == 2 * SMOKE_CASES
    # The model gives back the API's JSON as it was sent (`examhall report --json` prints it).
    assert report_json(report) == live.http.get(f"/v1/jobs/{finished.id}/report").json()
    text = client.report_text(finished.id)
    assert "pass@1" in text and "pass^2" in text and finished.id in text
    page = client.report_html(finished.id)
    assert page.lstrip().lower().startswith("<!doctype html")
    assert f'<span class="job-id">{finished.id}</span>' in page


def test_trials_events_and_artifacts(client: Client, live: Server, finished: JobView) -> None:
    trials = client.trials(finished.id)
    assert len(trials) == finished.planned_trials and all(isinstance(t, TrialView) for t in trials)
    trial = trials[0]
    assert client.trial(trial.id) == trial
    events = client.events(trial.id)
    assert events and all(isinstance(e, EventView) for e in events)
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert client.events(trial.id, after=1, limit=1) == events[1:2]
    assert "session.jsonl" in trial.artifacts
    raw = live.http.get(f"/v1/trials/{trial.id}/artifacts/session.jsonl").content
    assert client.artifact(trial.id, "session.jsonl") == raw and raw


def test_reviews_of_a_drawn_sample(client: Client, finished: JobView) -> None:
    sample = client.draw_sample(finished.id, size=2, seed=1)
    assert sample.job_id == finished.id and 1 <= len(sample.trials) <= 2
    assert client.review_sample(finished.id) == sample
    first = sample.trials[0]
    review = client.review(finished.id, first.trial_id, "fail", note="Looks wrong.", reviewer="ann")
    assert isinstance(review, ReviewView)
    assert (review.trial_id, review.verdict, review.note, review.reviewer) == (
        first.trial_id,
        "fail",
        "Looks wrong.",
        "ann",
    )
    again = client.review(finished.id, first.trial_id, "pass")
    assert client.reviews(finished.id) == [again]
    assert client.reviews(finished.id, history=True) == [review, again]


def test_upload_of_a_task_directory(client: Client, tmp_path: Path) -> None:
    tree = harbor_tree(tmp_path / "my tasks")
    suite = client.upload(tree)
    assert suite.id == archive_id(pack_directory(tree))
    assert suite.name == "my-tasks" and suite.kind == "harbor"
    assert sorted(suite.tasks) == ["hello", "jq-count"] and suite.refused == []
    assert client.upload(tree, name="again").id == suite.id


def test_cancel_stops_a_job_and_a_finished_job_refuses_it(
    client: Client, finished: JobView
) -> None:
    source = (ROOT / "tests" / "suites" / "slow.py").read_text()
    job = client.submit(suite={"name": "slow", "source": source}, model="faux/solution", rounds=3)
    assert cancel_and_settle(client, job.id).status == "cancelled"
    # Cancelling a cancelled job changes nothing.
    assert client.cancel(job.id).status == "cancelled"
    with pytest.raises(ApiError) as refused:
        client.cancel(finished.id)
    assert refused.value.status == 409
    assert refused.value.problems == [
        f"Job {finished.id} has finished; there is nothing to cancel."
    ]


def test_errors_carry_the_status_and_the_servers_detail(client: Client, live: Server) -> None:
    with pytest.raises(ApiError) as missing:
        client.job("no-such-job")
    assert missing.value.status == 404 and "no-such-job" in missing.value.problems[0]
    with pytest.raises(ApiError) as invalid:
        client.submit(suite="smoke", model="simulated/coin", rounds=0)
    assert invalid.value.status == 422
    assert any(line.startswith("rounds: ") for line in invalid.value.problems), invalid.value
    assert str(invalid.value).startswith("POST /v1/jobs: HTTP 422")
    with Client(live.url, "exh_not_a_token") as stranger, pytest.raises(ApiError) as refused:
        stranger.jobs()
    assert refused.value.status == 401
    with Client(live.url, "exh_not_a_token") as stranger, pytest.raises(ApiError) as page:
        stranger.report_html("any")
    assert page.value.status == 401 and "token was refused" in page.value.problems[0]


def test_the_async_client(live: Server, finished: JobView) -> None:
    async def run() -> tuple[list[StreamEvent], JobView, Report, list[TrialView], str]:
        async with AsyncClient(live.url, live.token) as client:
            job = await client.submit(suite="smoke", model=COIN, cases=["count-lines"])
            events = [event async for event in client.follow(job.id)]
            done = await client.wait(job.id)
            return (
                events,
                done,
                await client.report(job.id),
                await client.trials(job.id),
                await client.report_text(finished.id),
            )

    events, done, report, trials, text = asyncio.run(run())
    assert events[-1].event == "end" and done.status == "finished"
    assert report.job == done.id and len(trials) == 1 == done.counts.finished
    with Client(live.url, live.token) as client:
        assert text == client.report_text(finished.id)


def test_the_readmes_first_python_example_runs(live: Server) -> None:
    readme = (ROOT / "README.md").read_text()
    example = re.search(r"```python\n(.*?)```", readme, re.DOTALL)
    assert example is not None, "README.md has no Python example"
    env = {**os.environ, "EXAMHALL_SERVER": live.url, "EXAMHALL_TOKEN": live.token}
    done = subprocess.run(
        [sys.executable, "-c", example.group(1)],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    status, rate = done.stdout.splitlines()[0].split()
    assert status == "finished" and 0.0 <= float(rate) <= 1.0
    assert "pass@1" in done.stdout
