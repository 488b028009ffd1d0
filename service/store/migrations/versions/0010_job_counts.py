"""Counts and a change marker per job, and an index a report reads instead of the trials.

job_counts keeps each job's trials counted by their latest attempt, updated in the same
transaction as every change of a trial's status, and a version that rises with each such
change; trials.changed holds the version at a trial's last change, so a job's event stream
reads only what changed. The upgrade counts the existing jobs once, from their trials.
ix_trials_report covers the columns a report reads of every trial.

Revision ID: 0010
Revises: 0009
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | None = None
depends_on: str | None = None

# A planned trial's latest attempt: no later attempt of the same (job, variant, order).
_LATEST = """
    NOT EXISTS (
        SELECT 1 FROM trials AS later
        WHERE later.job_id = t.job_id AND later.variant = t.variant
          AND later."order" = t."order" AND later.attempt > t.attempt
    )
"""


def _latest_count(condition: str) -> str:
    return (
        f"(SELECT COUNT(*) FROM trials AS t WHERE t.job_id = jobs.id AND {condition} AND {_LATEST})"
    )


def upgrade() -> None:
    op.create_table(
        "job_counts",
        sa.Column("job_id", sa.String(40), sa.ForeignKey("jobs.id"), primary_key=True),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("queued", sa.Integer(), nullable=False),
        sa.Column("running", sa.Integer(), nullable=False),
        sa.Column("finished", sa.Integer(), nullable=False),
        sa.Column("passed", sa.Integer(), nullable=False),
        sa.Column("failed", sa.Integer(), nullable=False),
        sa.Column("error", sa.Integer(), nullable=False),
        sa.Column("version", sa.BigInteger(), nullable=False),
    )
    with op.batch_alter_table("trials") as batch:
        batch.add_column(sa.Column("changed", sa.BigInteger(), nullable=False, server_default="0"))
    op.create_index(
        "ix_trials_report",
        "trials",
        [
            "job_id",
            "variant",
            "order",
            "attempt",
            "case_id",
            "round",
            "status",
            "outcome",
            "error_kind",
        ],
    )
    op.create_index("ix_trials_changed", "trials", ["job_id", "changed"])
    latest = [
        _latest_count(condition)
        for condition in (
            "t.status = 'queued'",
            "t.status = 'running'",
            "t.status = 'finished'",
            "t.outcome = 'passed'",
            "t.outcome = 'failed'",
            "t.outcome = 'error'",
        )
    ]
    op.execute(
        "INSERT INTO job_counts "
        "(job_id, attempts, queued, running, finished, passed, failed, error, version) "
        "SELECT jobs.id, (SELECT COUNT(*) FROM trials AS t WHERE t.job_id = jobs.id), "
        + ", ".join(latest)
        + ", 1 FROM jobs"
    )


def downgrade() -> None:
    op.drop_index("ix_trials_changed", "trials")
    op.drop_index("ix_trials_report", "trials")
    with op.batch_alter_table("trials") as batch:
        batch.drop_column("changed")
    op.drop_table("job_counts")
