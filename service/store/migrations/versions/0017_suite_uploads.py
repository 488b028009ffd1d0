"""Suite uploads per owner (issue 27).

An uploaded tree's bytes stay in suites, once, keyed by their sha256; suite_uploads records
which team (or admins, as 'admin') uploaded them and under which name, so that neither the
answer to an upload nor a read by id tells one team that another holds the same bytes, or
what it called them.

A store's existing trees were uploaded by no one it recorded: each team (admins as one) that
ran a job on a tree is taken to have uploaded it, under the first name its jobs gave it. A
tree no job used is nobody's until it is uploaded again (`examhall submit DIR` uploads before
it submits).

Revision ID: 0017
Revises: 0016
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0017"
down_revision: str | None = "0016"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "suite_uploads",
        sa.Column("owner", sa.String(40), primary_key=True),
        sa.Column("sha256", sa.String(64), sa.ForeignKey("suites.sha256"), primary_key=True),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
    )
    # The first job of each owner and tree names it; ties on the time go to the lowest id.
    op.execute(
        """
        INSERT INTO suite_uploads (owner, sha256, name, created_at)
        SELECT COALESCE(j.team_id, 'admin'), j.suite_sha256, j.suite_name, j.created_at
        FROM jobs j JOIN suites s ON s.sha256 = j.suite_sha256
        WHERE s.kind = 'harbor' AND NOT EXISTS (
            SELECT 1 FROM jobs e
            WHERE e.suite_sha256 = j.suite_sha256
              AND COALESCE(e.team_id, 'admin') = COALESCE(j.team_id, 'admin')
              AND (e.created_at < j.created_at OR (e.created_at = j.created_at AND e.id < j.id))
        )
        """
    )


def downgrade() -> None:
    op.drop_table("suite_uploads")
