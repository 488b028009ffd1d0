"""The states a job and a trial pass through, and how a finished trial came out.

They are `StrEnum`s: the store and the wire keep the plain strings, and a member compares
equal to its string.
"""

from __future__ import annotations

from enum import StrEnum


class JobStatus(StrEnum):
    # A task suite's environments are being built; its trials are planned once they are.
    BUILDING = "building"
    QUEUED = "queued"
    RUNNING = "running"
    FINISHED = "finished"
    CANCELLED = "cancelled"


class TrialStatus(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    FINISHED = "finished"


class Outcome(StrEnum):
    PASSED = "passed"
    FAILED = "failed"
    ERROR = "error"


# The error kind of a trial of a task whose environment did not build: it never ran, is not
# scored (the suite's task is broken, not the agent) and is not retried (the same build would
# fail again). Written by the store (service/store/jobs.py), counted by the report.
BUILD_ERROR = "build_error"
