"""The egress policies a team may pick for its jobs (issue 28).

A team's `egress` lists, comma-separated, the operator's egress policies (EXAMHALL_EGRESS_POLICIES)
its jobs may name; null, as every team stored before this has, is every policy of the box.
`offline` needs no listing: it reaches nothing.

Revision ID: 0018
Revises: 0017
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0018"
down_revision: str | None = "0017"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    with op.batch_alter_table("teams") as batch:
        batch.add_column(sa.Column("egress", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("teams") as batch:
        batch.drop_column("egress")
