"""Events keyed by (trial_id, seq), without a surrogate id.

Nothing reads an event by its id: a transcript is read by trial and seq, which the unique
index ix_events_trial_seq already held. On PostgreSQL the id cost every event written a
sequence's next value and an entry in a second index (about 7% of the event sink's rate);
that index becomes the primary key. On SQLite the table is rebuilt once (an implicit rowid
takes the id's place, so its writes cost what they did).

Revision ID: 0016
Revises: 0015
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0016"
down_revision: str | None = "0015"
branch_labels: str | None = None
depends_on: str | None = None

ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.drop_column("events", "id")  # with its primary key and sequence
        # The unique index on the same columns becomes the key, without a second build.
        op.execute(
            "ALTER TABLE events ADD CONSTRAINT events_pkey PRIMARY KEY USING INDEX "
            "ix_events_trial_seq"
        )
        return
    with op.batch_alter_table("events", recreate="always") as batch:
        batch.drop_index("ix_events_trial_seq")
        batch.drop_column("id")
        batch.create_primary_key("events_pkey", ["trial_id", "seq"])


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("ALTER TABLE events DROP CONSTRAINT events_pkey")
        # As 0001 and 0006 left it: a bigserial (its sequence named as 0006 expects).
        op.execute("ALTER TABLE events ADD COLUMN id BIGSERIAL PRIMARY KEY")
    else:
        with op.batch_alter_table("events", recreate="always") as batch:
            batch.drop_constraint("events_pkey", type_="primary")
            batch.add_column(sa.Column("id", ID, primary_key=True, autoincrement=True))
    op.create_index("ix_events_trial_seq", "events", ["trial_id", "seq"], unique=True)
