"""Infrastructure faults on a run's queue items: how many times an evaluation was lost through no fault of its
candidate (its Ray worker or node went away, the runner shut down) and the last such fault, one line. Such a fault
puts the item back in the queue; it is never an evaluation row.

Revision ID: 0011
Revises: 0010
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("queue_items") as batch:
        batch.add_column(sa.Column("faults", sa.Integer(), nullable=False, server_default="0"))
        batch.add_column(sa.Column("last_fault", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("queue_items") as batch:
        batch.drop_column("last_fault")
        batch.drop_column("faults")
