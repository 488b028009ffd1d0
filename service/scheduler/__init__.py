"""Running a box's queued trials: the loop (`loop.py`), what each trial runs (`run_spec.py`)
and how its events come in (`ingest.py`); a building job's environments (`prepare.py`); a
Python suite's cases listed in a sandbox, within the box's caps (`listing.py`)."""

from service.scheduler.ingest import EVENT_BATCH, EventSink
from service.scheduler.loop import Scheduler

__all__ = ["EVENT_BATCH", "EventSink", "Scheduler"]
