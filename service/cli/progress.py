"""A job's progress as the CLI draws it: a bar of its trials and a line a task's build, from
the job's stream (examhall.Client.follow)."""

from __future__ import annotations

import sys
from typing import Any, TextIO

from examhall import Client, JobView
from service.domain.builds import ENDED
from service.domain.status import JobStatus

# How often a log (not a terminal) is told a running build's time.
LOG_EVERY_S = 10


def watch(client: Client, job_id: str, *, out: TextIO = sys.stderr) -> JobView:
    """Follow the job's stream to its end, drawing a progress bar; return the job."""
    last = ""  # the last counts line
    width = 0  # how much of a terminal's line the last redrawn line took
    told: dict[str, tuple[str, str | None, int]] = {}
    for followed in client.follow(job_id):
        event, data = followed.event, followed.data
        if event == "build":
            # A terminal redraws a running build's line each second; a log gets a line
            # per step and per end, and one every LOG_EVERY_S of a step that takes long.
            seen = (data["state"], data.get("step"), data.get("elapsed_s", 0) // LOG_EVERY_S)
            if seen == told.get(data["case"]) and not out.isatty():
                continue
            told[data["case"]] = seen
            line, done = build_line(data), data["state"] in ENDED
        elif event == "counts":
            line, done = progress_line(data), False
            if line == last:
                continue
            last = line
        else:
            continue
        if out.isatty():
            print(f"{line:<{width}}", end="\n" if done else "\r", file=out, flush=True)
            width = 0 if done else len(line)
        else:
            print(line, file=out, flush=True)
    if out.isatty() and width:
        print(file=out)
    return client.job(job_id)


def progress_line(counts: dict[str, Any], width: int = 30) -> str:
    planned = max(1, counts["planned_trials"])
    done = min(counts["finished"], planned)
    filled = round(width * done / planned)
    bar = "#" * filled + "." * (width - filled)
    active = (JobStatus.QUEUED, JobStatus.RUNNING)
    status = "" if counts["status"] in active else f"  {counts['status']}"
    return (
        f"[{bar}] {done}/{planned} trials  running {counts['running']}  "
        f"passed {counts['passed']}  failed {counts['failed']}  error {counts['error']}{status}"
    )


# A terminal line's worth of a build's step.
STEP_SHOWN = 60


def build_line(build: dict[str, Any]) -> str:
    """One task's build, as the stream's `build` event tells it (service/domain/builds.py):
    "building 3/12: jq-filter Step 4/9 : RUN apt-get ... 42 s", "cached 1/12: ..."."""
    where = f"{build['index']}/{build['of']}: {build['case']}"
    state = build["state"]
    if state == "building":
        step = build.get("step") or "starting"
        if len(step) > STEP_SHOWN:
            step = step[: STEP_SHOWN - 3] + "..."
        return f"building {where} {step} {build['elapsed_s']} s"
    if state == "built":
        return f"built {where} in {build['elapsed_s']} s"
    if state == "failed":
        step = build.get("failed_step")
        return f"failed {where}{f' at {step}' if step else ''} after {build['elapsed_s']} s"
    return f"{state} {where}"
