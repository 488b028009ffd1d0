"""Named, versioned task sets (issue 38): `examhall suites push NAME@VERSION DIR`.

`suite_sets` holds each owner's versions of each set it pushed: the version's name and the
stored tree (suites.sha256) it names, immutable once pushed. `suite_set_shares` holds the
teams an admin shared a set with (every version of it, those pushed later included).

Revision ID: 0023
Revises: 0022
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0023"
down_revision: str | None = "0022"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "suite_sets",
        sa.Column("owner", sa.String(40), primary_key=True),
        sa.Column("name", sa.String(100), primary_key=True),
        sa.Column("version", sa.String(60), primary_key=True),
        sa.Column("sha256", sa.String(64), sa.ForeignKey("suites.sha256"), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
    )
    op.create_table(
        "suite_set_shares",
        sa.Column("owner", sa.String(40), primary_key=True),
        sa.Column("name", sa.String(100), primary_key=True),
        sa.Column("team_id", sa.String(40), sa.ForeignKey("teams.id"), primary_key=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("suite_set_shares")
    op.drop_table("suite_sets")
