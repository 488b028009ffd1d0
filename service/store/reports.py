"""What a job's report and its pages read from the store.

A report needs a dozen columns of every trial, never the whole rows: loading ORM objects
(judges, final text, every timing) and decoding their JSON would be most of the cost of a
large job's report. So `report_rows` selects only those columns, with the few JSON fields it
needs extracted by the database (`->>` and CAST on PostgreSQL, JSON_EXTRACT on SQLite).

A job without a comparison needs no telemetry at all: `outcome_rows` reads the first eight
columns alone, from the index that holds them (`ix_trials_report`), not from the rows, and
the two facts it leaves out come apart, each from a pass the database makes without Python
seeing a row per trial: the distinct models returned, and the rare trials that hit a limit.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Result, Text, cast, select
from sqlalchemy.orm import Session

from service.store.models import Event, Trial

# The columns of `report_rows`, in order; `report.from_store` maps them onto its TrialFacts.
REPORT_COLUMNS = (
    "case_id",
    "variant",
    "round",
    "order",
    "attempt",
    "status",
    "outcome",
    "error_kind",
    "model_returned",
    "input_tokens",
    "output_tokens",
    "tool_calls",
    "latency_s",
    "system_prompt_sha256",
    "limits_hit",
    "cost_usd",
)


# What every report reads of every attempt: the columns ix_trials_report holds.
_OUTCOMES = (
    Trial.case_id,
    Trial.variant,
    Trial.round,
    Trial.order,
    Trial.attempt,
    Trial.status,
    Trial.outcome,
    Trial.error_kind,
)


def report_rows(session: Session, job_id: str) -> Result[*tuple[Any, ...]]:
    """Every attempt of the job's trials as rows of REPORT_COLUMNS. `latency_s` is the agent's
    run time and `limits_hit` is JSON text (decode it with `limits_hit`)."""
    return session.execute(
        select(
            *_OUTCOMES,
            Trial.model_returned,
            Trial.usage["input_tokens"].as_integer(),
            Trial.usage["output_tokens"].as_integer(),
            Trial.tool_calls,
            Trial.timings["run_agent"].as_float(),
            Trial.system_prompt_sha256,
            # As text: nearly every trial's is "[]", which is then not decoded at all.
            cast(Trial.limits_hit, Text),
            Trial.usage["cost_usd"].as_float(),
        ).where(Trial.job_id == job_id)
    )


# The first columns of REPORT_COLUMNS, all in ix_trials_report.
OUTCOME_COLUMNS = REPORT_COLUMNS[:8]


def outcome_rows(session: Session, job_id: str) -> Result[*tuple[Any, ...]]:
    """Every attempt of the job's trials as rows of OUTCOME_COLUMNS."""
    return session.execute(select(*_OUTCOMES).where(Trial.job_id == job_id))


def models_returned(session: Session, job_id: str) -> list[str]:
    """The distinct models the job's trials' answers named."""
    query = select(Trial.model_returned).where(
        Trial.job_id == job_id, Trial.model_returned.is_not(None)
    )
    return sorted(session.scalars(query.distinct()))


def limits_by_attempt(session: Session, job_id: str) -> dict[tuple[str, int, int], tuple[str, ...]]:
    """(variant, order, attempt) -> the limits hit, for the job's trials that hit any."""
    text = cast(Trial.limits_hit, Text)
    rows = session.execute(
        select(Trial.variant, Trial.order, Trial.attempt, text).where(
            Trial.job_id == job_id, text != "[]", text != "null"
        )
    )
    found = {(variant, order, attempt): limits_hit(hit) for variant, order, attempt, hit in rows}
    return {key: hit for key, hit in found.items() if hit}


def limits_hit(text: str | None) -> tuple[str, ...]:
    """A trial's `limits_hit` from `report_rows`' JSON text: the usual empty list is not
    decoded."""
    if text is None or text == "[]":
        return ()
    return tuple(json.loads(text) or ())


def trial_events(session: Session, trial_id: str, limit: int) -> Sequence[Event]:
    """The first `limit` events of a trial, in order (the trial page's transcript)."""
    return session.scalars(
        select(Event).where(Event.trial_id == trial_id).order_by(Event.seq).limit(limit)
    ).all()


def job_environments(session: Session, job_id: str) -> tuple[tuple[str, str, str, str | None], ...]:
    """(case, variant, image, digest) of the job's trials that ran in an image of their own,
    each once, in case then variant order."""
    rows = session.execute(
        select(Trial.case_id, Trial.variant, Trial.image, Trial.image_digest)
        .where(Trial.job_id == job_id, Trial.image.is_not(None))
        .distinct()
        .order_by(Trial.case_id, Trial.variant)
    )
    return tuple(
        (case, variant, image or "", digest) for case, variant, image, digest in rows if image
    )
