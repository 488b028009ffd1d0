"""Teams and their API tokens; every job belongs to the team that submitted it.

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "teams",
        sa.Column("id", sa.String(40), primary_key=True),
        sa.Column("name", sa.String(100), nullable=False, unique=True),
        sa.Column("max_containers", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
    )
    op.create_table(
        "tokens",
        sa.Column("id", sa.String(40), primary_key=True),
        sa.Column("team_id", sa.String(40), sa.ForeignKey("teams.id"), nullable=True),
        sa.Column("admin", sa.Boolean(), nullable=False),
        sa.Column("sha256", sa.String(64), nullable=False, unique=True),
        sa.Column("prefix", sa.String(16), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("revoked_at", sa.DateTime(), nullable=True),
    )
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("team_id", sa.String(40), nullable=True))
        batch.create_foreign_key("fk_jobs_team_id", "teams", ["team_id"], ["id"])
        batch.create_index("ix_jobs_team_id", ["team_id"])


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.drop_index("ix_jobs_team_id")
        batch.drop_constraint("fk_jobs_team_id", type_="foreignkey")
        batch.drop_column("team_id")
    op.drop_table("tokens")
    op.drop_table("teams")
