"""The review pages, as pure functions of what the API would return: a job's review queue
(its sample of record, a form to draw another, the agreement so far unless the sample is
blind) and a sampled trial's review page (its artifacts and transcript, the reviews so far
and the form; its judges only once the verdict may be shown, service/review/blindness.py)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from service.api.review_schemas import MAX_NOTE, MAX_REVIEWER, MAX_SAMPLE, ReviewView, SampleView
from service.api.schemas import EventView, JobView, TrialView
from service.report.model import Report
from service.review.blindness import ReviewerKey, shown_artifacts
from service.web import transcript
from service.web.pages import ArtifactFacts, artifact_links
from service.web.templating import render

# A first sample reviews this many trials unless the team asks for another size.
DEFAULT_SIZE = 20


@dataclass(frozen=True)
class DrawForm:
    """The draw form's fields: as last drawn, or as just refused."""

    size: str
    seed: str
    blind: bool = True
    replace: bool = False


def queue_page(
    job: JobView,
    report: Report,
    sample: SampleView | None,
    who: str,
    *,
    error: str | None = None,
    draw: DrawForm | None = None,
) -> str:
    reviewed = 0 if sample is None else sum(1 for t in sample.trials if t.review is not None)
    if draw is None:
        size = sample.size if sample else DEFAULT_SIZE
        seed = sample.seed if sample else job.spec.get("seed", 0)
        draw = DrawForm(str(size), str(seed))
    return render(
        "review_queue.html",
        job=job,
        report=report,
        sample=sample,
        # A blind queue leaves the agreement (the judges' verdicts, in sum) to the job page.
        blind=sample is not None and bool(sample.blind),
        reviewed=reviewed,
        error=error,
        max_size=MAX_SAMPLE,
        draw=draw,
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
    verdict_shown: bool,
    mine: ReviewerKey,
    shown_limit: int,
    artifacts: ArtifactFacts | None = None,
    form: ReviewForm | None = None,
    error: str | None = None,
) -> str:
    """`history` is the trial's reviews in the sample of record; `mine`, the viewer's token,
    whose own latest review fills the form. Until the verdict may be shown, neither the
    judges nor other people's reviews are."""
    if form is None:
        own = [r for r in history if (r.team, r.token_prefix) == mine]
        last = own[-1] if own else None
        form = ReviewForm(last.verdict, last.note, last.reviewer) if last else ReviewForm()
    names = shown_artifacts(trial.artifacts, verdict_shown)
    return render(
        "review_trial.html",
        trial=trial,
        job=job,
        verdict_shown=verdict_shown,
        state=trial.outcome or trial.status,
        artifacts=[link for link in artifact_links(trial, artifacts or {}) if link.name in names],
        items=transcript.items(events),
        events_shown=len(events),
        shown_limit=shown_limit,
        history=history if verdict_shown else [],
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
