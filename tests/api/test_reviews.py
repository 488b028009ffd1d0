"""Human review over real HTTP: a control plane on a loopback port with SQLite on disk, jobs
run by the fake backend (tests/review_jobs.py), samples and reviews through the API."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from statsmodels.stats.inter_rater import cohens_kappa  # type: ignore[import-untyped]

from service.api.sessions import SESSION_COOKIE
from service.review.sampling import Candidate, sampled_outcome
from tests.review_jobs import AGENT_ERROR, ERRORED, Box, review_box, submit_review_job
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


def _sample(
    client: httpx.Client, job: str, size: int, seed: int, **options: bool
) -> dict[str, Any]:
    """A new sample of record, replacing the job's (these tests draw many)."""
    body = {"size": size, "seed": seed, "replace": True, **options}
    response = client.post(f"/v1/jobs/{job}/review-sample", json=body)
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
        # The newest sample is the job's sample of record; it retired the others.
        assert red.get(f"/v1/jobs/{box.job}/review-sample").json()["id"] == larger["id"]
    assert first["retired_at"] is None and first["blind"] is True
    assert first["id"] != again["id"] and _ids(first) == _ids(again)
    assert _ids(other) != _ids(first)
    assert set(_ids(first)) <= set(_ids(larger)) and len(_ids(larger)) == 20
    # Recomputed from the trials as the API lists them, by the documented algorithm.
    candidates = [
        Candidate(t["id"], t["variant"], t["case_id"], t["round"], t["order"], outcome)
        for t in trials
        if (outcome := sampled_outcome(t["outcome"], t["error_kind"])) is not None
    ]
    assert _ids(first) == _recomputed(candidates, 9, 77)
    assert _ids(larger) == _recomputed(candidates, 20, 77)
    by_plan = {(t["case_id"], t["round"], t["variant"]): t["id"] for t in trials}
    everything = _sample(_client(box, box.red), box.job, 1000, 1, blind=False)
    assert by_plan[ERRORED] not in _ids(everything) and by_plan[AGENT_ERROR] in _ids(everything)
    assert len(_ids(everything)) == len(candidates)
    # Every stratum has a place in the smaller sample: the scored error's too.
    strata = {
        (t["variant"], t["outcome"]) for t in everything["trials"] if t["trial_id"] in _ids(first)
    }
    assert strata == {
        *((v, o) for v in ("with_docs", "without_docs") for o in ("passed", "failed")),
        ("without_docs", "error"),
    }


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
            blue.post(
                f"/v1/jobs/{box.job}/review-sample", json={"size": 3, "seed": 1, "replace": True}
            ),
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
            assert detail["loc"] == ["body", "trial_id"]
            assert "not in the review sample of record" in detail["msg"]
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
    ({"size": 3, "seed": 1, "blind": "no"}, ["body", "blind"]),
    ({"size": 3, "seed": 1, "replace": 1}, ["body", "replace"]),
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
            outcome = trials[entry["trial_id"]]["outcome"]
            human = outcome == "passed" and entry["case_id"] != "case-1"
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
            scores = {j["name"]: j["score"] for j in trial["judges"] or []}
            if judge is not None and judge not in scores:
                continue  # a scored error no judge scored: only the trial's verdict has it
            passed = trial["outcome"] == "passed" if judge is None else scores[judge] >= 1
            table[0 if human else 1][0 if passed else 1] += 1
        row = rows[(judge, "all")]
        c = row["confusion"]
        assert [
            [c["human_pass_judge_pass"], c["human_pass_judge_fail"]],
            [c["human_fail_judge_pass"], c["human_fail_judge_fail"]],
        ] == table, judge
        n = sum(map(sum, table))
        assert row["reviewed"] == n
        assert row["percent_agreement"] == pytest.approx((table[0][0] + table[1][1]) / n)
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


def test_a_redraw_needs_replace_and_then_the_report_counts_only_the_new_samples_reviews(
    box: Box,
) -> None:
    """A job's sample of record is replaced only when asked to; the refusal names it and
    changes nothing; after the redraw, the report (also one built before) counts the new
    sample's reviews and says how many of the retired one's it left out."""
    job = submit_review_job(box.server, box.red, rounds=1)
    with _client(box, box.red) as red:
        first = _sample(red, job, 4, 1)
        for entry in first["trials"][:2]:
            review = {"trial_id": entry["trial_id"], "verdict": "pass"}
            assert red.post(f"/v1/jobs/{job}/reviews", json=review).status_code == 201
        before = red.get(f"/v1/jobs/{job}/report").json()["agreement"]
        queue = red.get(f"/v1/jobs/{job}/review-sample").json()
        refused = red.post(f"/v1/jobs/{job}/review-sample", json={"size": 6, "seed": 2})
        assert refused.status_code == 409, refused.text
        detail = refused.json()["detail"]
        assert first["id"] in detail and '"replace": true' in detail and "2 reviews" in detail
        assert red.get(f"/v1/jobs/{job}/review-sample").json() == queue
        assert red.get(f"/v1/jobs/{job}/report").json()["agreement"] == before

        second = _sample(red, job, 6, 2)
        assert second["reviews"] == 0 and second["id"] != first["id"]
        # A trial only the retired sample drew can no longer be reviewed.
        gone = next((t for t in _ids(first) if t not in _ids(second)), None)
        if gone is not None:
            late = red.post(f"/v1/jobs/{job}/reviews", json={"trial_id": gone, "verdict": "fail"})
            assert late.status_code == 422, late.text
        after = red.get(f"/v1/jobs/{job}/report").json()["agreement"]
        text = red.get(f"/v1/jobs/{job}/report", params={"format": "text"}).text
        assert (after["sampled"], after["reviewed"], after["rows"]) == (6, 0, [])
        assert (after["retired_reviews"], after["retired_samples"]) == (2, 1)
        assert "2 review(s) made in 1 retired sample(s) are kept but not counted" in text

        entry = second["trials"][0]
        new = {"trial_id": entry["trial_id"], "verdict": "fail"}
        made = red.post(f"/v1/jobs/{job}/reviews", json=new).json()
        counted = red.get(f"/v1/jobs/{job}/report").json()["agreement"]
        latest = red.get(f"/v1/jobs/{job}/reviews").json()
        history = red.get(f"/v1/jobs/{job}/reviews", params={"history": True}).json()
    assert before["sampled"] == 4 and before["reviewed"] == 2
    assert counted["reviewed"] == 1 and counted["sample_id"] == second["id"]
    assert counted["retired_reviews"] == 2
    assert made["sample_id"] == second["id"] and made["revises"] is None
    assert latest == [made]  # the sample of record's reviews
    assert [r["sample_id"] for r in history] == [first["id"], first["id"], second["id"]]


def _verdicts(sample: dict[str, Any]) -> dict[str, tuple[bool, str | None]]:
    return {t["trial_id"]: (t["verdict_shown"], t["outcome"]) for t in sample["trials"]}


def test_a_blind_sample_shows_a_verdict_only_to_the_token_that_reviewed_it(box: Box) -> None:
    job = submit_review_job(box.server, box.red, rounds=1)
    other = box.server.team_token("red")  # a second token of red: another reviewer
    with _client(box, box.red) as red, _client(box, other) as colleague:
        drawn = _sample(red, job, 5, 3)
        trials = {t["id"]: t for t in red.get(f"/v1/jobs/{job}/trials").json()}
        assert drawn["blind"] is True
        assert set(_verdicts(drawn).values()) == {(False, None)}
        assert all(t["error_kind"] is None for t in drawn["trials"])
        first = drawn["trials"][0]["trial_id"]
        review = {"trial_id": first, "verdict": "pass"}
        made = red.post(f"/v1/jobs/{job}/reviews", json=review).json()
        mine = _verdicts(red.get(f"/v1/jobs/{job}/review-sample").json())
        theirs = _verdicts(colleague.get(f"/v1/jobs/{job}/review-sample").json())
        revised = red.post(f"/v1/jobs/{job}/reviews", json={**review, "verdict": "fail"}).json()
    assert made["verdict_seen"] is False and revised["verdict_seen"] is True
    assert mine[first] == (True, trials[first]["outcome"])
    assert all(shown == (False, None) for trial, shown in mine.items() if trial != first)
    assert set(theirs.values()) == {(False, None)}


def test_an_open_sample_shows_verdicts_and_the_report_says_it_was_not_blind(box: Box) -> None:
    """A sample drawn with blind false shows every verdict at once, and a scored error
    (agent_error) is drawn, shown as such, reviewed, and counted as a failed trial."""
    job = submit_review_job(box.server, box.red)
    with _client(box, box.red) as red:
        drawn = _sample(red, job, 1000, 5, blind=False)
        trials = {t["id"]: t for t in red.get(f"/v1/jobs/{job}/trials").json()}
        errored = next(
            t["id"]
            for t in trials.values()
            if (t["case_id"], t["round"], t["variant"]) == AGENT_ERROR
        )
        review = {"trial_id": errored, "verdict": "pass", "note": "the file was right"}
        made = red.post(f"/v1/jobs/{job}/reviews", json=review).json()
        report = red.get(f"/v1/jobs/{job}/report").json()
        text = red.get(f"/v1/jobs/{job}/report", params={"format": "text"}).text
    assert drawn["blind"] is False and made["verdict_seen"] is True
    shown = _verdicts(drawn)
    assert all(shown[t] == (True, trials[t]["outcome"]) for t in _ids(drawn))
    entry = next(t for t in drawn["trials"] if t["trial_id"] == errored)
    assert (entry["outcome"], entry["error_kind"]) == ("error", "agent_error")
    agreement = report["agreement"]
    assert agreement["blind"] is False and agreement["scored_errors"] == 1
    assert agreement["verdict_seen"] == 1 and "not blind" in agreement["counted"]
    assert "not blind" in text
    # The person's pass against the trial's fail; no judge scored the crashed run.
    (row,) = agreement["rows"]
    assert row["judge"] is None and row["confusion"]["human_pass_judge_fail"] == 1
