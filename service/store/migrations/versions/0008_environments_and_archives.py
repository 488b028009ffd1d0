"""Task environments and uploaded suite trees (issue 13).

suites.kind tells examhall's Python suites ('python', every existing row) from uploaded
Harbor trees ('harbor'), whose archive bytes are kept in suites.archive. jobs.error says why
a job ended without running (an environment that failed to build). trials.image and
trials.image_digest record the environment a trial ran in (null: the job's image).
environment_builds keeps each environment build by the content hash of what went into it.

Revision ID: 0008
Revises: 0007
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    with op.batch_alter_table("suites") as batch:
        # The server default fills the existing rows, all of them Python suites.
        batch.add_column(sa.Column("kind", sa.String(20), nullable=False, server_default="python"))
        batch.add_column(sa.Column("archive", sa.LargeBinary(), nullable=True))
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("error", sa.Text(), nullable=True))
    with op.batch_alter_table("trials") as batch:
        batch.add_column(sa.Column("image", sa.String(200), nullable=True))
        batch.add_column(sa.Column("image_digest", sa.String(100), nullable=True))
    op.create_table(
        "environment_builds",
        sa.Column("content_hash", sa.String(64), primary_key=True),
        sa.Column("name", sa.String(300), nullable=False),
        sa.Column("image", sa.String(200), nullable=True),
        sa.Column("digest", sa.String(100), nullable=True),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("log", sa.Text(), nullable=False),
        sa.Column("started_at", sa.DateTime(), nullable=False),
        sa.Column("finished_at", sa.DateTime(), nullable=True),
    )


def downgrade() -> None:
    op.drop_table("environment_builds")
    with op.batch_alter_table("trials") as batch:
        batch.drop_column("image_digest")
        batch.drop_column("image")
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("error")
    with op.batch_alter_table("suites") as batch:
        batch.drop_column("archive")
        batch.drop_column("kind")
