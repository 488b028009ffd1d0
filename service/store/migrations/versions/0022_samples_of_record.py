"""Samples of record (issue 31): one review sample per job counts at a time, blind or not,
and each review belongs to the sample it was made in.

`review_samples.retired_at` marks a sample a later draw replaced; the one not retired is the
job's sample of record (a partial unique index keeps it one). `review_samples.blind` says
whether the judges' verdicts were hidden from its reviewers, `reviews.sample_id` which sample
a review was made in, and `reviews.verdict_seen` whether its reviewer had the verdict in view.

Before this, a job's reviews counted if their trial was in any of its samples. The upgrade
keeps that count: each job's newest sample becomes its sample of record, holding the trials
of all its samples (in plan order) and every review of the job; the older samples are
retired when the next one was drawn. Nothing was hidden then and nothing recorded it, so
`blind` and `verdict_seen` stay null (unknown).

Revision ID: 0022
Revises: 0021
"""

from __future__ import annotations

from itertools import pairwise
from typing import Any

import sqlalchemy as sa
from alembic import op

revision: str = "0022"
down_revision: str | None = "0021"
branch_labels: str | None = None
depends_on: str | None = None

_OF_RECORD = "retired_at IS NULL"

_samples = sa.table(
    "review_samples",
    sa.column("id", sa.String),
    sa.column("job_id", sa.String),
    sa.column("trial_ids", sa.JSON),
    sa.column("created_at", sa.DateTime),
    sa.column("retired_at", sa.DateTime),
)
_reviews = sa.table("reviews", sa.column("job_id", sa.String), sa.column("sample_id", sa.String))
_trials = sa.table(
    "trials",
    sa.column("id", sa.String),
    sa.column("variant", sa.String),
    sa.column("order", sa.Integer),
)


def _plan_order(bind: sa.Connection, trial_ids: set[str]) -> list[str]:
    rows = bind.execute(
        sa.select(_trials.c.id, _trials.c.order, _trials.c.variant).where(
            _trials.c.id.in_(sorted(trial_ids))
        )
    ).all()
    placed = {row.id: (row.order, row.variant) for row in rows}
    return sorted(trial_ids, key=lambda t: (*placed.get(t, (0, "")), t))


def _one_sample_per_job(bind: sa.Connection) -> None:
    rows = bind.execute(
        sa.select(_samples.c.id, _samples.c.job_id, _samples.c.trial_ids, _samples.c.created_at)
    ).all()
    by_job: dict[str, list[Any]] = {}
    for row in rows:
        by_job.setdefault(row.job_id, []).append(row)
    for job_id, samples in by_job.items():
        samples.sort(key=lambda s: (s.created_at, s.id))
        record = samples[-1]
        for older, newer in pairwise(samples):
            bind.execute(
                _samples.update()
                .where(_samples.c.id == older.id)
                .values(retired_at=newer.created_at)
            )
        union = {str(t) for sample in samples for t in sample.trial_ids or []}
        if len(samples) > 1:
            bind.execute(
                _samples.update()
                .where(_samples.c.id == record.id)
                .values(trial_ids=_plan_order(bind, union))
            )
        bind.execute(
            _reviews.update().where(_reviews.c.job_id == job_id).values(sample_id=record.id)
        )


def upgrade() -> None:
    with op.batch_alter_table("review_samples") as batch:
        batch.add_column(sa.Column("blind", sa.Boolean(), nullable=True))
        batch.add_column(sa.Column("retired_at", sa.DateTime(), nullable=True))
    with op.batch_alter_table("reviews") as batch:
        batch.add_column(sa.Column("sample_id", sa.String(40), nullable=True))
        batch.add_column(sa.Column("verdict_seen", sa.Boolean(), nullable=True))
    _one_sample_per_job(op.get_bind())
    with op.batch_alter_table("reviews") as batch:
        batch.alter_column("sample_id", existing_type=sa.String(40), nullable=False)
        batch.create_foreign_key("fk_reviews_sample_id", "review_samples", ["sample_id"], ["id"])
    op.create_index(
        "ix_review_samples_of_record",
        "review_samples",
        ["job_id"],
        unique=True,
        sqlite_where=sa.text(_OF_RECORD),
        postgresql_where=sa.text(_OF_RECORD),
    )


def downgrade() -> None:
    op.drop_index("ix_review_samples_of_record", "review_samples")
    with op.batch_alter_table("reviews") as batch:
        batch.drop_constraint("fk_reviews_sample_id", type_="foreignkey")
        batch.drop_column("verdict_seen")
        batch.drop_column("sample_id")
    with op.batch_alter_table("review_samples") as batch:
        batch.drop_column("retired_at")
        batch.drop_column("blind")
