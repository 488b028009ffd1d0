"""Fewer index entries per stored trial, so a large job is submitted in a second or two.

ix_trials_job (job, case, variant, round) goes: the job page's grid now reads its trials
by plan order from ix_trials_report, which every other read by job uses too. ix_trials_changed
holds only trials that have changed (`changed` > 0): the event stream reads only those, and
a job's planned trials, stored queued with 0, no longer each add an entry.

Revision ID: 0012
Revises: 0011
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | None = None
depends_on: str | None = None

CHANGED = "changed > 0"


def upgrade() -> None:
    op.drop_index("ix_trials_job", "trials")
    op.drop_index("ix_trials_changed", "trials")
    op.create_index(
        "ix_trials_changed",
        "trials",
        ["job_id", "changed"],
        sqlite_where=sa.text(CHANGED),
        postgresql_where=sa.text(CHANGED),
    )


def downgrade() -> None:
    op.drop_index("ix_trials_changed", "trials")
    op.create_index("ix_trials_changed", "trials", ["job_id", "changed"])
    op.create_index("ix_trials_job", "trials", ["job_id", "case_id", "variant", "round"])
