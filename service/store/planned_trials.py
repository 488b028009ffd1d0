"""Storing a job's planned trials: up to hundreds of thousands of queued rows in one
request, so by the driver's own bulk path rather than SQLAlchemy's per-row parameters.

A 100,000-trial job was 3 s of a quiet machine's time here (10 s under load): a dict and
random id per row, SQLAlchemy processing every row's parameters, and rows inserted at
random places in the id index. Now rows are tuples, ids are the job's random part and the
trial's order (so a job's rows are appended to the id index together), SQLite takes them
through `executemany` and PostgreSQL through `COPY`.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable, Mapping

from sqlalchemy import Table
from sqlalchemy.orm import Session

from service.domain.status import TrialStatus
from service.store.models import Trial

# Every column a new queued trial sets (the rest are NULL, `changed` 0).
COLUMNS = (
    "id",
    "job_id",
    "case_id",
    "variant",
    "round",
    "order",
    "attempt",
    "status",
    "image",
    "image_digest",
    "changed",
)

Row = tuple[str, str, str, str, int, int, int, str, str | None, str | None, int]


def planned_rows(
    job_id: str,
    planned: Iterable[tuple[str, str, int, int]],
    images: Mapping[tuple[str, str], tuple[str, str | None]] | None = None,
) -> list[Row]:
    """A queued row per planned (case_id, variant, round, order); with `images`, each
    (case, variant) named there runs in that image and digest.

    Ids are "trial-", 64 random bits drawn once for the job, and the order in 8 hex digits:
    as unguessable between jobs as a random id, and in insert order within one. A retry's
    id (`models.new_trial_id`, 16 hex digits) is shorter, so it is never one of these."""
    prefix = f"trial-{secrets.token_hex(8)}"
    queued = str(TrialStatus.QUEUED)
    images = images or {}
    unbuilt: tuple[str | None, str | None] = (None, None)
    return [
        (
            f"{prefix}{order:08x}",
            job_id,
            case,
            variant,
            round_,
            order,
            1,
            queued,
            *images.get((case, variant), unbuilt),
            0,
        )
        for case, variant, round_, order in planned
    ]


def insert_rows(session: Session, rows: list[Row]) -> None:
    """Insert the rows in the session's transaction (which commits or drops them all)."""
    if not rows:
        return
    connection = session.connection()
    table = Trial.__table__
    assert isinstance(table, Table)
    quote = connection.dialect.identifier_preparer.quote
    columns = ", ".join(quote(name) for name in COLUMNS)
    if connection.dialect.name == "postgresql":
        # COPY is PostgreSQL's bulk path: one statement for every row, where executemany
        # sends (and plans) an INSERT per row.
        driver = connection.connection.driver_connection
        assert driver is not None
        statement = f"COPY {quote(table.name)} ({columns}) FROM STDIN"
        with driver.cursor() as cursor, cursor.copy(statement) as copy:
            for row in rows:
                copy.write_row(row)
        return
    # sqlite3's executemany, its parameters in its own (qmark) style.
    assert connection.dialect.name == "sqlite", connection.dialect.name
    marks = ", ".join("?" for _ in COLUMNS)
    statement = f"INSERT INTO {quote(table.name)} ({columns}) VALUES ({marks})"
    connection.exec_driver_sql(statement, rows)
