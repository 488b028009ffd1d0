"""A comparison's telemetry as columns, and an index that covers what its report reads.

A comparison's report reads every trial's tokens, cost and agent run time; from the JSON of
`usage` and `timings` that meant reading each trial's wide row and parsing its JSON twice
(most of a docs-lift report's time at 100,000 trials). They are now columns, written with
the result, and ix_trials_compared covers every column that report reads, for finished
trials only (a job's queued rows add no entry). The columns of trials already stored are
filled from their JSON here: a pass over every finished trial, once.

Revision ID: 0015
Revises: 0014
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0015"
down_revision: str | None = "0014"
branch_labels: str | None = None
depends_on: str | None = None

FINISHED = "status = 'finished'"
COLUMNS = ("input_tokens", "output_tokens", "latency_s", "cost_usd")


def upgrade() -> None:
    with op.batch_alter_table("trials") as batch:
        batch.add_column(sa.Column("input_tokens", sa.BigInteger(), nullable=True))
        batch.add_column(sa.Column("output_tokens", sa.BigInteger(), nullable=True))
        batch.add_column(sa.Column("latency_s", sa.Float(), nullable=True))
        batch.add_column(sa.Column("cost_usd", sa.Float(), nullable=True))
    # The values as the report read them from the JSON until now (the same expressions).
    trials = sa.table(
        "trials",
        sa.column("status", sa.String()),
        sa.column("usage", sa.JSON()),
        sa.column("timings", sa.JSON()),
        *(sa.column(name) for name in COLUMNS),
    )
    op.execute(
        trials.update()
        .where(sa.or_(trials.c.usage.is_not(None), trials.c.timings.is_not(None)))
        .values(
            input_tokens=trials.c.usage["input_tokens"].as_integer(),
            output_tokens=trials.c.usage["output_tokens"].as_integer(),
            latency_s=trials.c.timings["run_agent"].as_float(),
            cost_usd=trials.c.usage["cost_usd"].as_float(),
        )
    )
    op.create_index(
        "ix_trials_compared",
        "trials",
        [
            "job_id",
            "variant",
            "order",
            "attempt",
            "case_id",
            "round",
            "status",
            "outcome",
            "error_kind",
            "model_returned",
            "tool_calls",
            "system_prompt_sha256",
            *COLUMNS,
        ],
        sqlite_where=sa.text(FINISHED),
        postgresql_where=sa.text(FINISHED),
    )


def downgrade() -> None:
    op.drop_index("ix_trials_compared", "trials")
    with op.batch_alter_table("trials") as batch:
        for name in reversed(COLUMNS):
            batch.drop_column(name)
