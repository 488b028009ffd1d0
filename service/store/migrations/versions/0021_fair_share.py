"""Fair share (issue 30): a team's share of the queue, and a job's priority within its team.

Teams take turns at the queue in proportion to `teams.share` (null, as every team stored
before this has, is 1); within a team, jobs are served by `jobs.priority` (higher first,
0 for every job stored before this), then by age.

Revision ID: 0021
Revises: 0020
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0021"
down_revision: str | None = "0020"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    with op.batch_alter_table("teams") as batch:
        batch.add_column(sa.Column("share", sa.Integer(), nullable=True))
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("priority", sa.Integer(), nullable=False, server_default="0"))


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("priority")
    with op.batch_alter_table("teams") as batch:
        batch.drop_column("share")
