"""Measured device peaks: a CPU's copy bandwidth and peak fp32 FLOP/s, measured once per device and kept, so the
leaderboard can put every native kernel against its roofline (GPUs use their datasheet figures).

Revision ID: 0007
Revises: 0006
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "device_peaks",
        sa.Column("device", sa.String(255), nullable=False),
        sa.Column("copy_gbps", sa.Float(), nullable=False),
        sa.Column("peak_gflops", sa.Float(), nullable=False),
        sa.Column("threads", sa.Integer(), nullable=False),
        sa.Column("measured_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("device", name="pk_device_peaks"),
    )


def downgrade() -> None:
    op.drop_table("device_peaks")
