"""Each task's environment build, on its job's row, for the job's event stream (issue 28).

A task suite's job is `building` while its environments are built; `jobs.builds` holds each
task's build as the preparer last wrote it (waiting, building at a step, cached, built or
failed), so that every control plane's stream of the job can tell it. Jobs already stored
have none.

Revision ID: 0019
Revises: 0018
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0019"
down_revision: str | None = "0018"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("builds", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("builds")
