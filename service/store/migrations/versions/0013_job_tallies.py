"""Judge passes and returned models kept per job, and an index of the trials with an image.

job_tallies holds what a report read every trial's wide row for (each judge's passes over
a variant's scored trials, the models the answers named), kept with the counts as trials
end. Jobs already stored are left untallied (job_counts.tallied false): their reports count
from the trials as before, and a recount of their counts tallies them. ix_trials_images holds
only the trials that ran in an image of their own, so the report's record of a job that has
none reads no trial.

Revision ID: 0013
Revises: 0012
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | None = None
depends_on: str | None = None

HAS_IMAGE = "image IS NOT NULL"


def upgrade() -> None:
    op.create_table(
        "job_tallies",
        sa.Column("job_id", sa.String(40), sa.ForeignKey("jobs.id"), primary_key=True),
        sa.Column("kind", sa.String(16), primary_key=True),
        sa.Column("variant", sa.String(100), primary_key=True),
        sa.Column("name", sa.Text(), primary_key=True),
        sa.Column("passed", sa.Integer(), nullable=False),
        sa.Column("count", sa.Integer(), nullable=False),
    )
    with op.batch_alter_table("job_counts") as batch:
        batch.add_column(
            sa.Column("tallied", sa.Boolean(), nullable=False, server_default=sa.text("false"))
        )
    op.create_index(
        "ix_trials_images",
        "trials",
        ["job_id", "case_id", "variant", "image", "image_digest"],
        sqlite_where=sa.text(HAS_IMAGE),
        postgresql_where=sa.text(HAS_IMAGE),
    )


def downgrade() -> None:
    op.drop_index("ix_trials_images", "trials")
    with op.batch_alter_table("job_counts") as batch:
        batch.drop_column("tallied")
    op.drop_table("job_tallies")
