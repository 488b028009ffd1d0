"""Human review over real HTTP: a control plane on a loopback port with SQLite on disk, jobs
run by the fake backend (tests/review_jobs.py), samples and reviews through the API."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from statsmodels.stats.inter_rater import cohens_kappa  # type: ignore[import-untyped]

from service.api.sessions import SESSION_COOKIE
from service.review.sampling import Candidate
from tests.review_jobs import ERRORED, Box, review_box, submit_review_job
from tests.unit.test_review_sampling import _recomputed
from tests.web.test_web_ui import wait_for


@pytest.fixture(scope="module")
def box(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Box]:
    yield from review_box(tmp_path_factory.mktemp("reviews"))


def _client(box: Box, token: str) -> httpx.Client:
    return box.server.as_team(token)


def _reviews(box: Box, history: bool = True) -> list[dict[str, Any]]:
    with _client(box, box.red) as red:
        response = red.get(f"/v1/jobs/{box.job}/reviews", params={"history": history})
    assert response.status_code == 200, response.text
    found: list[dict[str, Any]] = response.json()
    return found


def _sample(client: httpx.Client, job: str, size: int, seed: int) -> dict[str, Any]:
    response = client.post(f"/v1/jobs/{job}/review-sample", json={"size": size, "seed": seed})
    assert response.status_code == 201, response.text
    sample: dict[str, Any] = response.json()
    return sample


def _ids(sample: dict[str, Any]) -> list[str]:
    return [t["trial_id"] for t in sample["trials"]]


def test_the_sample_is_reproducible_from_its_seed_and_recomputable(box: Box) -> None:
    with _client(box, box.red) as red:
        first = _sample(red, box.job, 9, 77)
        again = _sample(red, box.job, 9, 77)
        other = _sample(red, box.job, 9, 78)
        larger = _sample(red, box.job, 20, 77)
        trials = red.get(f"/v1/jobs/{box.job}/trials").json()
        # The newest sample is the job's queue.
        assert red.get(f"/v1/jobs/{box.job}/review-sample").json()["id"] == larger["id"]
    assert first["id"] != again["id"] and _ids(first) == _ids(again)
    assert _ids(other) != _ids(first)
    assert set(_ids(first)) <= set(_ids(larger)) and len(_ids(larger)) == 20
    # Recomputed from the trials as the API lists them, by the documented algorithm.
    candidates = [
        Candidate(t["id"], t["variant"], t["case_id"], t["round"], t["order"], t["outcome"])
        for t in trials
        if t["outcome"] in ("passed", "failed")
    ]
    assert _ids(first) == _recomputed(candidates, 9, 77)
    assert _ids(larger) == _recomputed(candidates, 20, 77)
    errored = next(t["id"] for t in trials if (t["case_id"], t["round"], t["variant"]) == ERRORED)
    everything = _sample(_client(box, box.red), box.job, 1000, 1)
    assert errored not in _ids(everything) and len(_ids(everything)) == len(candidates)
    strata = {(t["variant"], t["outcome"]) for t in first["trials"]}
    assert strata == {(v, o) for v in ("with_docs", "without_docs") for o in ("passed", "failed")}


def test_reviews_are_stored_with_who_and_revisions_keep_history(box: Box) -> None:
    with _client(box, box.red) as red:
        sample = _sample(red, box.job, 6, 5)
        trial = sample["trials"][0]
        first = red.post(
            f"/v1/jobs/{box.job}/reviews",
            json={"trial_id": trial["trial_id"], "verdict": "fail", "note": "a", "reviewer": "ann"},
        )
        second = red.post(
            f"/v1/jobs/{box.job}/reviews",
            json={"trial_id": trial["trial_id"], "verdict": "pass", "note": "on second look"},
        )
        queue = red.get(f"/v1/jobs/{box.job}/review-sample").json()
    assert first.status_code == second.status_code == 201, (first.text, second.text)
    made, revised = first.json(), second.json()
    assert (made["team"], made["via"], made["reviewer"]) == ("red", "api", "ann")
    assert made["token_prefix"] == box.red[:12] and made["revises"] is None
    assert made["case_id"] == trial["case_id"] and made["variant"] == trial["variant"]
    assert revised["revises"] == made["id"] and revised["verdict"] == "pass"
    history = [r for r in _reviews(box) if r["trial_id"] == trial["trial_id"]]
    assert [r["id"] for r in history] == [made["id"], revised["id"]]
    latest = [r for r in _reviews(box, history=False) if r["trial_id"] == trial["trial_id"]]
    assert latest == [revised]
    assert queue["trials"][0]["review"] == revised


def test_another_team_gets_404_and_changes_nothing(box: Box) -> None:
    with _client(box, box.red) as red:
        sample = _sample(red, box.job, 4, 9)
    before = _reviews(box)
    trial_id = sample["trials"][0]["trial_id"]
    review = {"trial_id": trial_id, "verdict": "pass"}
    with _client(box, box.blue) as blue:
        for response in (
            blue.get(f"/v1/jobs/{box.job}/review-sample"),
            blue.post(f"/v1/jobs/{box.job}/review-sample", json={"size": 3, "seed": 1}),
            blue.get(f"/v1/jobs/{box.job}/reviews"),
            blue.post(f"/v1/jobs/{box.job}/reviews", json=review),
            blue.get("/v1/jobs/job-nope/reviews"),
        ):
            assert response.status_code == 404, response.text
            assert response.json()["detail"].startswith("No job")
        # Through blue's own job, red's trial is just not in a sample: 422, as a made-up id.
        _sample(blue, box.blue_job, 4, 9)
        messages = []
        for other in (trial_id, "trial-0000000000000000"):
            refused = blue.post(
                f"/v1/jobs/{box.blue_job}/reviews", json={**review, "trial_id": other}
            )
            assert refused.status_code == 422, refused.text
            (detail,) = refused.json()["detail"]
            assert (
                detail["loc"] == ["body", "trial_id"] and "not in a review sample" in detail["msg"]
            )
            messages.append(detail["msg"].replace(other, "TRIAL"))
        assert messages[0] == messages[1]  # nothing tells red's trial from no trial
    assert _reviews(box) == before


BAD_SAMPLES = [
    ({"size": 0, "seed": 1}, ["body", "size"]),
    ({"size": 1001, "seed": 1}, ["body", "size"]),
    ({"size": 3, "seed": -1}, ["body", "seed"]),
    ({"size": 3, "seed": 2**32}, ["body", "seed"]),
    ({"seed": 1}, ["body", "size"]),
    ({"size": True, "seed": 1}, ["body", "size"]),
    ({"size": "3", "seed": 1}, ["body", "size"]),
    ({"size": 3, "seed": 1, "stratify": "no"}, ["body", "stratify"]),
]


@pytest.mark.parametrize(("body", "loc"), BAD_SAMPLES)
def test_a_bad_sample_request_is_422_naming_the_field(
    box: Box, body: dict[str, Any], loc: list[str]
) -> None:
    with _client(box, box.blue) as blue:
        before = blue.get(f"/v1/jobs/{box.blue_job}/review-sample")
        response = blue.post(f"/v1/jobs/{box.blue_job}/review-sample", json=body)
        after = blue.get(f"/v1/jobs/{box.blue_job}/review-sample")
    assert response.status_code == 422, response.text
    assert response.json()["detail"][0]["loc"] == loc
    assert before.text == after.text


def test_bad_reviews_are_422_and_store_nothing(box: Box) -> None:
    with _client(box, box.red) as red:
        trial_id = _sample(red, box.job, 4, 21)["trials"][0]["trial_id"]
        before = _reviews(box)
        good = {"trial_id": trial_id, "verdict": "pass"}
        for body, loc, words in [
            ({**good, "verdict": "maybe"}, ["body", "verdict"], "'pass' or 'fail'"),
            ({"verdict": "pass"}, ["body", "trial_id"], "Field required"),
            ({**good, "note": "x" * 4001}, ["body", "note"], "at most 4000"),
            ({**good, "note": "a\x00b"}, ["body", "note"], "U+0000"),
            ({**good, "reviewer": "ann\nbob"}, ["body", "reviewer"], "U+000A"),
            ({**good, "extra": 1}, ["body", "extra"], "Extra inputs"),
        ]:
            response = red.post(f"/v1/jobs/{box.job}/reviews", json=body)
            assert response.status_code == 422, (body, response.text)
            detail = response.json()["detail"][0]
            assert detail["loc"] == loc and words in detail["msg"], detail
        assert red.post(f"/v1/jobs/{box.job}/reviews", content=b"{not json").status_code == 422
    assert _reviews(box) == before


def test_a_browser_cookie_alone_cannot_write_over_the_api(box: Box) -> None:
    signed_in = httpx.post(f"{box.server.url}/ui/login", data={"token": box.red})
    assert signed_in.status_code == 303
    before = _reviews(box)
    with httpx.Client(base_url=box.server.url, cookies=signed_in.cookies) as browser:
        assert browser.get(f"/v1/jobs/{box.job}/reviews").status_code == 200  # reads are fine
        sample = browser.get(f"/v1/jobs/{box.job}/review-sample").json()
        response = browser.post(
            f"/v1/jobs/{box.job}/reviews",
            json={"trial_id": sample["trials"][0]["trial_id"], "verdict": "fail"},
        )
        assert browser.cookies.get(SESSION_COOKIE)
    assert response.status_code == 403 and "Bearer" in response.json()["detail"]
    assert _reviews(box) == before


def test_the_report_gains_agreement_only_with_reviews(box: Box) -> None:
    with _client(box, box.blue) as blue:
        plain = blue.get(f"/v1/jobs/{box.blue_job}/report").json()
        text = blue.get(f"/v1/jobs/{box.blue_job}/report", params={"format": "text"}).text
        sample = _sample(blue, box.blue_job, 1000, 4)
        # A sample alone changes nothing: the same report, byte for byte.
        assert blue.get(f"/v1/jobs/{box.blue_job}/report").json() == plain
        assert "agreement" not in plain and "Human review" not in text
        trials = {t["id"]: t for t in blue.get(f"/v1/jobs/{box.blue_job}/trials").json()}
        # People fail every case-1 trial and otherwise agree with the trial's verdict.
        verdicts: dict[str, bool] = {}
        for entry in sample["trials"][:14]:
            human = entry["outcome"] == "passed" and entry["case_id"] != "case-1"
            verdicts[entry["trial_id"]] = human
            response = blue.post(
                f"/v1/jobs/{box.blue_job}/reviews",
                json={"trial_id": entry["trial_id"], "verdict": "pass" if human else "fail"},
            )
            assert response.status_code == 201, response.text
        report = blue.get(f"/v1/jobs/{box.blue_job}/report").json()
        text = blue.get(f"/v1/jobs/{box.blue_job}/report", params={"format": "text"}).text
    agreement = report["agreement"]
    assert agreement["reviewed"] == 14 and agreement["sampled"] == len(sample["trials"])
    assert "Human review: 14 of" in text
    rows = {(r["judge"], r["variant"]): r for r in agreement["rows"]}
    for judge in (None, "file_equals", "answer_given"):
        table = [[0, 0], [0, 0]]
        for trial_id, human in verdicts.items():
            trial = trials[trial_id]
            scores = {j["name"]: j["score"] for j in trial["judges"]}
            passed = trial["outcome"] == "passed" if judge is None else scores[judge] >= 1
            table[0 if human else 1][0 if passed else 1] += 1
        row = rows[(judge, "all")]
        c = row["confusion"]
        assert [
            [c["human_pass_judge_pass"], c["human_pass_judge_fail"]],
            [c["human_fail_judge_pass"], c["human_fail_judge_fail"]],
        ] == table, judge
        assert row["reviewed"] == 14
        assert row["percent_agreement"] == pytest.approx((table[0][0] + table[1][1]) / 14)
        if row["kappa"]["value"] is not None and row["kappa"]["stderr"]:
            theirs = cohens_kappa(table)
            assert row["kappa"]["value"] == pytest.approx(theirs.kappa)
            assert row["kappa"]["ci95"][0] == pytest.approx(max(-1, theirs.kappa_low))
            assert row["kappa"]["ci95"][1] == pytest.approx(min(1, theirs.kappa_upp))
    (check,) = agreement["lift_checks"]
    assert (check["baseline"], check["candidate"]) == ("without_docs", "with_docs")
    assert check["pairs_reviewed"] >= 1 and check["confirms"] is not None


def test_a_job_still_running_cannot_be_sampled_until_it_stops(box: Box) -> None:
    job = submit_review_job(box.server, box.red, hang=True)
    with _client(box, box.red) as red:
        wait_for(
            lambda: red.get(f"/v1/jobs/{job}").json()["counts"]["running"] > 0,
            what="a trial to start",
        )
        early = red.post(f"/v1/jobs/{job}/review-sample", json={"size": 3, "seed": 1})
        assert early.status_code == 409, early.text
        assert "draw its review sample once it has finished" in early.json()["detail"]
        assert red.get(f"/v1/jobs/{job}/review-sample").status_code == 404
        assert red.delete(f"/v1/jobs/{job}").status_code == 200
        wait_for(
            lambda: red.get(f"/v1/jobs/{job}").json()["counts"]["running"] == 0,
            what="the cancelled trials to stop",
        )
        # Stopped, but nothing passed or failed: still nothing to review.
        empty = red.post(f"/v1/jobs/{job}/review-sample", json={"size": 3, "seed": 1})
    assert empty.status_code == 409 and "nothing to review" in empty.json()["detail"]


def test_a_report_already_built_sees_a_later_sample(box: Box) -> None:
    """Reports are kept by the job's markers: a sample drawn after a reviewed report was built
    must reach the next report's `sampled`, not the kept one's."""
    job = submit_review_job(box.server, box.red, rounds=1)
    with _client(box, box.red) as red:
        first = _sample(red, job, 2, 1)
        review = {"trial_id": first["trials"][0]["trial_id"], "verdict": "pass"}
        assert red.post(f"/v1/jobs/{job}/reviews", json=review).status_code == 201
        before = red.get(f"/v1/jobs/{job}/report").json()["agreement"]
        second = _sample(red, job, 6, 2)
        after = red.get(f"/v1/jobs/{job}/report").json()["agreement"]
    assert before["sampled"] == 2
    assert after["sampled"] == len(set(_ids(first)) | set(_ids(second))) > 2
    assert after["reviewed"] == before["reviewed"] == 1
