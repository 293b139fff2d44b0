"""Confirmations: a finished run's fastest candidates re-measured beside the reference before the run reports its
best (the search keeps the maximum of noisy measurements; the reported figure is the median of fresh ones).

Revision ID: 0009
Revises: 0008
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "confirmations",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("candidate_id", sa.Integer(), nullable=False),
        sa.Column("device_name", sa.String(255), nullable=False),
        sa.Column("status", sa.String(32), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("reference_median_ms", sa.Float(), nullable=True),
        sa.Column("candidate_median_ms", sa.Float(), nullable=True),
        sa.Column("speedup", sa.Float(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], name="fk_confirmations_run_id_runs"),
        sa.ForeignKeyConstraint(["candidate_id"], ["candidates.id"], name="fk_confirmations_candidate_id_candidates"),
        sa.PrimaryKeyConstraint("id", name="pk_confirmations"),
    )
    op.create_index("ix_confirmations_run_id", "confirmations", ["run_id"])


def downgrade() -> None:
    op.drop_index("ix_confirmations_run_id", table_name="confirmations")
    op.drop_table("confirmations")
