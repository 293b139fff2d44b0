"""What a verdict's timing and a device's peaks need to be read later: each timing's standard error of the median
(the precision the evaluator's stopping rule reached, which the store used to drop), and the method that measured a
device's peaks (peaks measured by an older method are measured again rather than kept).

Revision ID: 0010
Revises: 0009
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("evaluations") as batch:
        batch.add_column(sa.Column("candidate_se_ms", sa.Float(), nullable=True))
        batch.add_column(sa.Column("reference_se_ms", sa.Float(), nullable=True))
        batch.add_column(sa.Column("compiled_reference_se_ms", sa.Float(), nullable=True))
    with op.batch_alter_table("device_peaks") as batch:
        batch.add_column(sa.Column("method", sa.String(64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("device_peaks") as batch:
        batch.drop_column("method")
    with op.batch_alter_table("evaluations") as batch:
        batch.drop_column("compiled_reference_se_ms")
        batch.drop_column("reference_se_ms")
        batch.drop_column("candidate_se_ms")
