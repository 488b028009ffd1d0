"""A task's environment build as a building job shows it: on the job's event stream, in
`GET /v1/jobs/{id}` and on the web job page (written by service/scheduler/build_progress.py)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

BuildState = Literal["waiting", "building", "cached", "built", "failed"]
ENDED: tuple[BuildState, ...] = ("cached", "built", "failed")
# The longest step line kept: a RUN line can be a whole script.
STEP_CHARS = 200


class TaskBuild(BaseModel):
    index: int  # the task's place among the job's tasks that have an environment, from 1
    of: int  # how many those are
    # waiting (for a build slot or its turn), building, or how it ended: cached (found by its
    # content hash, nothing built), built, or failed
    state: BuildState = "waiting"
    # The builder's last "Step N/M : INSTRUCTION" line, at most STEP_CHARS long.
    step: str | None = None
    # Seconds since its build began (the total once it ended); 0 for a cached one.
    elapsed_s: int = 0
    # The step that failed ("Step 2/3"), when state is failed and the builder named one.
    failed_step: str | None = None
