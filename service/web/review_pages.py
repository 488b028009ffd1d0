"""The review pages, as pure functions of what the API would return: a job's review queue
(its sample, a form to draw another, the agreement so far) and a sampled trial's review page
(the trial page's judges, artifacts and transcript, the reviews so far and the form)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from service.api.review_schemas import MAX_NOTE, MAX_REVIEWER, MAX_SAMPLE, ReviewView, SampleView
from service.api.schemas import EventView, JobView, TrialView
from service.report.model import Report
from service.web import transcript
from service.web.pages import ArtifactFacts, artifact_links
from service.web.templating import render

# A first sample reviews this many trials unless the team asks for another size.
DEFAULT_SIZE = 20


def queue_page(
    job: JobView,
    report: Report,
    sample: SampleView | None,
    who: str,
    *,
    error: str | None = None,
    size: int | str | None = None,
    seed: int | str | None = None,
) -> str:
    reviewed = 0 if sample is None else sum(1 for t in sample.trials if t.review is not None)
    return render(
        "review_queue.html",
        job=job,
        report=report,
        sample=sample,
        reviewed=reviewed,
        error=error,
        max_size=MAX_SAMPLE,
        size=size if size is not None else (sample.size if sample else DEFAULT_SIZE),
        seed=seed if seed is not None else (sample.seed if sample else job.spec.get("seed", 0)),
        who=who,
        refresh_s=None,
    )


@dataclass(frozen=True)
class ReviewForm:
    """What the form shows: the last review's values, or what was just refused."""

    verdict: str = ""
    note: str = ""
    reviewer: str = ""


def review_page(
    trial: TrialView,
    job: JobView,
    events: Sequence[EventView],
    history: Sequence[ReviewView],
    who: str,
    *,
    in_sample: bool,
    shown_limit: int,
    artifacts: ArtifactFacts | None = None,
    form: ReviewForm | None = None,
    error: str | None = None,
) -> str:
    if form is None:
        last = history[-1] if history else None
        form = ReviewForm(last.verdict, last.note, last.reviewer) if last else ReviewForm()
    return render(
        "review_trial.html",
        trial=trial,
        job=job,
        state=trial.outcome or trial.status,
        artifacts=artifact_links(trial, artifacts or {}),
        items=transcript.items(events),
        events_shown=len(events),
        shown_limit=shown_limit,
        history=history,
        in_sample=in_sample,
        verdict=form.verdict,
        note=form.note,
        reviewer=form.reviewer,
        max_note=MAX_NOTE,
        max_reviewer=MAX_REVIEWER,
        error=error,
        who=who,
        refresh_s=None,
    )
