"""64-bit ids for events and artifacts on PostgreSQL, whose serial stops at 2**31 - 1.

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | None = None
depends_on: str | None = None

TABLES = ("events", "artifacts")


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return  # SQLite's INTEGER PRIMARY KEY is 64-bit
    for table in TABLES:
        op.alter_column(table, "id", type_=sa.BigInteger(), existing_type=sa.Integer())
        op.execute(f"ALTER SEQUENCE {table}_id_seq AS bigint")


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    for table in TABLES:
        op.execute(f"ALTER SEQUENCE {table}_id_seq AS integer")
        op.alter_column(table, "id", type_=sa.Integer(), existing_type=sa.BigInteger())
