"""The pages, as pure functions from what the API would return to an HTML document: each
gathers what its template (service/web/templates/) shows, and the template writes it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from service.api.schemas import EventView, JobView, TrialView
from service.domain.job_spec import JobSpec
from service.domain.planner import first_cases_orders
from service.domain.status import JobStatus, TrialStatus
from service.report.model import TELEMETRY, Report
from service.store.metrics import TeamQueue
from service.web import transcript
from service.web.charts import chart
from service.web.formats import number
from service.web.grid import GridTrial, grid
from service.web.judge_matrix import judge_matrix
from service.web.templating import render

# While work is outstanding the page reloads itself this often (seconds).
REFRESH_S = 5
_BUSY = (JobStatus.BUILDING, JobStatus.QUEUED, JobStatus.RUNNING)


def variant_order(spec: JobSpec) -> list[str]:
    """Baseline first for comparisons (the report's arms), else as the job named them."""
    return spec.arms or list(spec.variants)


# ----- login and errors ---------------------------------------------------------------


def login_page(error: str | None = None, next_url: str = "/ui/jobs") -> str:
    return render("login.html", error=error, next_url=next_url, who=None, refresh_s=None)


def refused_page(message: str) -> str:
    return render("message.html", heading="Refused", message=message, who=None, refresh_s=None)


def not_found_page(message: str, who: str) -> str:
    return render("message.html", heading="Not found", message=message, who=who, refresh_s=None)


# ----- the jobs list ------------------------------------------------------------------


@dataclass(frozen=True)
class _JobRow:
    job: JobView
    model: str


def jobs_page(jobs: Sequence[JobView], who: str, queue: Sequence[TeamQueue] = ()) -> str:
    rows = [_JobRow(job, JobSpec.model_validate(job.spec).model_text()) for job in jobs]
    busy = any(job.status in _BUSY for job in jobs)
    refresh = REFRESH_S if busy else None
    return render("jobs.html", rows=rows, who=who, queue=queue, refresh_s=refresh)


OTHER_TEAMS = "other teams"


def own_queue(queue: Sequence[TeamQueue], team: str) -> list[TeamQueue]:
    """What a team sees of the box's queue: its own row, and every other team's summed into
    one (no other team's name or share: those are the operator's to see, on /metrics)."""
    own = [row for row in queue if row.team == team]
    others = [row for row in queue if row.team != team]
    if others:
        queued, running = sum(r.queued for r in others), sum(r.running for r in others)
        own.append(TeamQueue(OTHER_TEAMS, 0, queued, running))
    return own


# ----- a job --------------------------------------------------------------------------


# A page shows at most about this many cells in its grid (whole cases, at least one), and
# this many of a comparison's blocked pairs and flaky cases: a job of 100,000 trials would
# otherwise be a page of as many cells, seconds to make and to read. The API and the report
# list everything.
GRID_CELLS = 1000
LISTED = 100


def grid_cases(spec: JobSpec) -> list[str]:
    """The cases whose cells the job page's grid shows: the first, in plan order."""
    per_case = max(1, len(spec.arms or spec.variants) * spec.rounds)
    return spec.cases[: max(1, GRID_CELLS // per_case)]


def grid_orders(spec: JobSpec) -> list[int]:
    """The plan orders of the trials of `grid_cases`, by which the page reads them."""
    arms = len(spec.arms or spec.variants)
    return first_cases_orders(len(spec.cases), arms, spec.rounds, len(grid_cases(spec)))


def job_page(job: JobView, report: Report, trials: Sequence[GridTrial], who: str) -> str:
    """The job's page; `trials` need only be those of its `grid_cases`."""
    spec = JobSpec.model_validate(job.spec)
    busy = job.status in _BUSY
    return render(
        "job.html",
        job=job,
        report=report,
        model=spec.model_text(),
        busy=busy,
        listed=LISTED,
        chart=chart(report.variants, report.k),
        grid=grid(grid_cases(spec), variant_order(spec), report.k, trials),
        judges=judge_matrix(report.variants),
        telemetry=TELEMETRY,
        who=who,
        refresh_s=REFRESH_S if busy else None,
    )


# ----- a trial ------------------------------------------------------------------------


def _numbers(values: dict[str, Any] | None) -> str:
    shown = {
        name: number(value) if isinstance(value, float) else value
        for name, value in (values or {}).items()
        if value is not None
    }
    if not shown:
        return "—"
    return ", ".join(f"{name} {value}" for name, value in shown.items())


def artifact_url(trial_id: str, name: str) -> str:
    return f"/v1/trials/{quote(trial_id, safe='')}/artifacts/{quote(name, safe='')}"


def artifact_view_url(trial_id: str, name: str) -> str:
    return f"/ui/trials/{quote(trial_id, safe='')}/artifacts/{quote(name, safe='')}"


# An artifact's size and why it is download-only (None: it is readable in the browser too),
# by name: what service/web/artifact_text.py's artifact_facts reads from the store.
ArtifactFacts = Mapping[str, tuple[int, str | None]]


@dataclass(frozen=True)
class ArtifactLink:
    """An artifact as `templates/_artifacts.html` lists it."""

    name: str
    download: str
    view: str | None  # None: offered for download only
    size: int | None
    note: str | None  # why it is download-only


def artifact_links(trial: TrialView, facts: ArtifactFacts) -> list[ArtifactLink]:
    links = []
    for name in trial.artifacts:
        size, note = facts.get(name, (None, None))
        view = artifact_view_url(trial.id, name) if size is not None and note is None else None
        links.append(ArtifactLink(name, artifact_url(trial.id, name), view, size, note))
    return links


@dataclass(frozen=True)
class EnvironmentImage:
    """The image a trial ran in, as its page shows it."""

    image: str
    digest: str | None
    source: str  # what the image is: the task's environment, or the job's sandbox image


def environment_image(trial: TrialView, job_image: str, job_digest: str | None) -> EnvironmentImage:
    if trial.image:
        return EnvironmentImage(trial.image, trial.image_digest, "the task's environment")
    return EnvironmentImage(job_image, job_digest, "the job's sandbox image")


def trial_page(
    trial: TrialView,
    job: JobView,
    events: Sequence[EventView],
    who: str,
    *,
    image: EnvironmentImage,
    artifacts: ArtifactFacts | None = None,
    shown_limit: int | None = None,
) -> str:
    """The trial's page; without `artifacts` its artifacts are offered for download only."""
    finished = trial.status == TrialStatus.FINISHED
    busy = trial.status in (TrialStatus.QUEUED, TrialStatus.RUNNING)
    return render(
        "trial.html",
        trial=trial,
        job=job,
        state=trial.outcome if finished and trial.outcome else trial.status,
        usage=_numbers(trial.usage),
        timings=_numbers(trial.timings),
        image=image,
        artifacts=artifact_links(trial, artifacts or {}),
        items=transcript.items(events),
        events_shown=len(events),
        shown_limit=shown_limit,
        who=who,
        refresh_s=REFRESH_S if busy else None,
    )
