"""Leaderboard benches (one agent configuration over a suite), runs belonging to a bench, the work a task must do
at least (FLOPs and bytes, for the roofline floor) and its compute ops (its signature for the archive), and the
reference's energy per call.

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "benches",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("suite", sa.Text(), nullable=False),
        sa.Column("agent", sa.String(255), nullable=False),
        sa.Column("config", sa.JSON(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_benches"),
        sa.CheckConstraint("status IN ('running', 'done', 'failed', 'interrupted')", name="ck_benches_status"),
    )
    op.create_index("ix_benches_suite", "benches", ["suite"])
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("bench_id", sa.Integer(), nullable=True))
        batch.create_foreign_key("fk_runs_bench_id_benches", "benches", ["bench_id"], ["id"])
        batch.create_index("ix_runs_bench_id", ["bench_id"])
    with op.batch_alter_table("tasks") as batch:
        batch.add_column(sa.Column("flops", sa.Float(), nullable=True))
        batch.add_column(sa.Column("min_bytes", sa.BigInteger(), nullable=True))
        batch.add_column(sa.Column("ops", sa.JSON(), nullable=True))
    with op.batch_alter_table("evaluations") as batch:
        batch.add_column(sa.Column("reference_energy_j", sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("evaluations") as batch:
        batch.drop_column("reference_energy_j")
    with op.batch_alter_table("tasks") as batch:
        batch.drop_column("ops")
        batch.drop_column("min_bytes")
        batch.drop_column("flops")
    with op.batch_alter_table("runs") as batch:
        batch.drop_index("ix_runs_bench_id")
        batch.drop_constraint("fk_runs_bench_id_benches", type_="foreignkey")
        batch.drop_column("bench_id")
    op.drop_index("ix_benches_suite", table_name="benches")
    op.drop_table("benches")
