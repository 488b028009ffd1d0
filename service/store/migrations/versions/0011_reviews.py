"""Human review: seeded samples of a job's scored trials, and people's verdicts on them.

Revision ID: 0011
Revises: 0010
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | None = None
depends_on: str | None = None

# As service/store/models.py's ROW_ID: 64-bit on PostgreSQL, SQLite's rowid there.
_ROW_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "review_samples",
        sa.Column("id", sa.String(40), primary_key=True),
        sa.Column("job_id", sa.String(40), sa.ForeignKey("jobs.id"), nullable=False),
        sa.Column("size", sa.Integer(), nullable=False),
        sa.Column("seed", sa.BigInteger(), nullable=False),
        sa.Column("algorithm", sa.Integer(), nullable=False),
        sa.Column("trial_ids", sa.JSON(), nullable=False),
        sa.Column("created_by", sa.String(100), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
    )
    op.create_index("ix_review_samples_job_id", "review_samples", ["job_id"])
    op.create_table(
        "reviews",
        sa.Column("id", _ROW_ID, primary_key=True, autoincrement=True),
        sa.Column("job_id", sa.String(40), sa.ForeignKey("jobs.id"), nullable=False),
        sa.Column("trial_id", sa.String(40), sa.ForeignKey("trials.id"), nullable=False),
        sa.Column("verdict", sa.String(10), nullable=False),
        sa.Column("note", sa.Text(), nullable=False),
        sa.Column("team", sa.String(100), nullable=False),
        sa.Column("token_prefix", sa.String(16), nullable=True),
        sa.Column("via", sa.String(10), nullable=False),
        sa.Column("reviewer", sa.String(100), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
    )
    op.create_index("ix_reviews_job_trial", "reviews", ["job_id", "trial_id", "id"])


def downgrade() -> None:
    op.drop_index("ix_reviews_job_trial", "reviews")
    op.drop_table("reviews")
    op.drop_index("ix_review_samples_job_id", "review_samples")
    op.drop_table("review_samples")
