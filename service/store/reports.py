"""What a job's report and its pages read from the store.

A report needs a dozen columns of every trial, never the whole rows: loading ORM objects
(judges, final text, every timing) and decoding their JSON would be most of the cost of a
large job's report. So `report_columns` selects only those columns, from an index that
holds them (ix_trials_compared): the telemetry it needs of the JSON is kept in columns of
its own as each result is stored.

A job without a comparison needs no telemetry at all: `outcome_rows` reads the first eight
columns alone, from the index that holds them (`ix_trials_report`), not from the rows, and
the two facts it leaves out come apart, each from a pass the database makes without Python
seeing a row per trial: the distinct models returned, and the rare trials that hit a limit.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from sqlalchemy import JSON, Float, Select, Text, case, cast, func, or_, select, true
from sqlalchemy import text as sql_text
from sqlalchemy.orm import Session, aliased

from service.domain.outcomes import COUNTED_AS_FAILED
from service.domain.status import BUILD_ERROR, TrialStatus
from service.store.models import FINISHED, HIT_A_LIMIT, Event, Trial

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


# The first columns of REPORT_COLUMNS, all in ix_trials_report.
OUTCOME_COLUMNS = REPORT_COLUMNS[:8]


# What `report_columns` reads: the rare limits hit (`limits_by_attempt`) and the models
# returned (`models_returned`, or the job's tallies) come apart.
_READ_COLUMNS = tuple(
    name for name in REPORT_COLUMNS if name not in ("limits_hit", "model_returned")
)
# What it reads of finished trials: their status is known, and unread costs no string a row.
_FINISHED_READ = tuple(name for name in _READ_COLUMNS if name != "status")


def report_columns(
    session: Session, job_id: str, *, all_finished: bool = False
) -> dict[str, Sequence[Any]]:
    """Every attempt of the job's trials as REPORT_COLUMNS but `limits_hit` and
    `model_returned`, by name: `latency_s` is the agent's run time.

    Finished trials, nearly all of a job a report is asked for, are read from the index
    that holds these columns (ix_trials_compared, which holds only them), the others from
    their rows; `all_finished` (the job's kept counts say none is queued or running) skips
    that pass over the job's rows, which no index holds."""
    query = _report_query(job_id, status=False).where(sql_text(FINISHED))
    finished = _columns(session, query, _FINISHED_READ)
    finished["status"] = (TrialStatus.FINISHED.value,) * len(finished[_FINISHED_READ[0]])
    others = None
    if not all_finished:
        query = _report_query(job_id).where(sql_text(f"NOT ({FINISHED})"))
        others = _columns(session, query, _READ_COLUMNS)
    if not others or not others[_READ_COLUMNS[0]]:
        return {name: finished[name] for name in _READ_COLUMNS}
    return {name: (*finished[name], *others[name]) for name in _READ_COLUMNS}


def outcome_columns(session: Session, job_id: str) -> dict[str, Sequence[Any]]:
    """Every attempt of the job's trials as OUTCOME_COLUMNS, by name."""
    return _columns(session, select(*_OUTCOMES).where(Trial.job_id == job_id), OUTCOME_COLUMNS)


def _columns(
    session: Session, query: Select[*tuple[Any, ...]], names: Sequence[str]
) -> dict[str, Sequence[Any]]:
    # SQLAlchemy runs the statement (its parameters bound as it binds them) and the
    # driver's cursor gives the rows: plain tuples, without the Row objects and their
    # processing, which cost about as much as the query itself for 100,000 rows. No column
    # needs a result conversion: they are text and numbers.
    result = session.connection().execute(query)
    try:
        rows = result.cursor.fetchall()
    finally:
        result.close()
    columns: list[Sequence[Any]] = list(zip(*rows, strict=True)) if rows else [()] * len(names)
    return dict(zip(names, columns, strict=True))


def _report_query(job_id: str, *, status: bool = True) -> Select[*tuple[Any, ...]]:
    return select(
        *(column for column in _OUTCOMES if status or column is not Trial.status),
        Trial.input_tokens,
        Trial.output_tokens,
        Trial.tool_calls,
        Trial.latency_s,
        Trial.system_prompt_sha256,
        Trial.cost_usd,
    ).where(Trial.job_id == job_id)


def models_returned(session: Session, job_id: str) -> list[str]:
    """The distinct models the job's trials' answers named."""
    query = select(Trial.model_returned).where(
        Trial.job_id == job_id, Trial.model_returned.is_not(None)
    )
    return sorted(session.scalars(query.distinct()))


def limits_by_attempt(session: Session, job_id: str) -> dict[tuple[str, int, int], tuple[str, ...]]:
    """(variant, order, attempt) -> the limits hit, for the job's trials that hit any."""
    rows = session.execute(
        select(Trial.variant, Trial.order, Trial.attempt, cast(Trial.limits_hit, Text)).where(
            Trial.job_id == job_id, sql_text(HIT_A_LIMIT)
        )
    )
    found = {(variant, order, attempt): limits_hit(hit) for variant, order, attempt, hit in rows}
    return {key: hit for key, hit in found.items() if hit}


def limits_hit(text: str | None) -> tuple[str, ...]:
    """A trial's `limits_hit` from its JSON text: the usual empty list is not decoded."""
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


def job_unbuilt(session: Session, job_id: str) -> tuple[tuple[str, str | None, str], ...]:
    """(case, step, error) of the job's cases whose environment did not build, each once."""
    rows = session.execute(
        select(Trial.case_id, Trial.failed_step, Trial.error_message)
        .where(Trial.job_id == job_id, Trial.error_kind == BUILD_ERROR)
        .distinct()
        .order_by(Trial.case_id)
    )
    return tuple((case, step, error or "") for case, step, error in rows)


def _judge_elements(session: Session) -> tuple[Any, Callable[[str], Any]]:
    """Every trial's judges unpacked by the database, one row each (to join the trials to),
    and a reader of one key of a judge."""
    if session.get_bind().dialect.name == "postgresql":
        # A trial's judges may be JSON null (a queued row), which json_array_elements refuses.
        judges = case(
            (func.json_typeof(Trial.judges) == "array", Trial.judges),
            else_=cast("[]", JSON),
        )
        element = func.json_array_elements(judges).table_valued("value").render_derived()
        return element, lambda key: element.c.value.op("->>")(key)
    element = func.json_each(Trial.judges).table_valued("value")
    return element, lambda key: func.json_extract(element.c.value, f"$.{key}")


def judge_counts(session: Session, job_id: str) -> list[tuple[str, str, int, int]]:
    """(variant, judge name, trials it passed (score 1), trials it scored) over the job's
    scored trials' last attempts (only unscored outcomes are retried, but a later attempt is
    excluded anyway), each judge as the trials recorded it.

    The database unpacks every trial's judges and counts them, so a large job's report never
    decodes a JSON list per trial in Python."""
    later = aliased(Trial)
    newer_attempt = (
        select(later.id)
        .where(
            later.job_id == Trial.job_id,
            later.variant == Trial.variant,
            later.order == Trial.order,
            later.attempt > Trial.attempt,
        )
        .exists()
    )
    element, field = _judge_elements(session)
    name, score = field("name"), cast(field("score"), Float)
    passed = func.sum(case((score >= 1.0, 1), else_=0))
    rows = session.execute(
        select(Trial.variant, name, passed, func.count())
        .select_from(Trial)
        .join(element, true())
        .where(
            Trial.job_id == job_id,
            Trial.status == "finished",
            # Scored, as `verdict` has it: passed, failed, or an error of the agent's side.
            or_(
                Trial.outcome.in_(("passed", "failed")),
                Trial.error_kind.in_(sorted(COUNTED_AS_FAILED)),
            ),
            name.is_not(None),
            ~newer_attempt,
        )
        .group_by(Trial.variant, name)
    )
    return [(variant, str(judge), int(ok or 0), int(n)) for variant, judge, ok, n in rows]


def judge_rubrics(session: Session, job_id: str) -> tuple[tuple[str, str], ...]:
    """(judge, rubric sha256) of the model-graded judges the job's trials recorded, each once."""
    element, field = _judge_elements(session)
    name, rubric = field("name"), field("rubric_sha256")
    rows = session.execute(
        select(name, rubric)
        .select_from(Trial)
        .join(element, true())
        .where(Trial.job_id == job_id, rubric.is_not(None))
        .distinct()
        .order_by(name, rubric)
    )
    return tuple((str(judge), str(digest)) for judge, digest in rows)
