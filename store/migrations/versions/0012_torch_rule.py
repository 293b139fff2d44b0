"""The rule for PyTorch inside a candidate that a verdict ran under, and PyTorch's share of the reference's work
(issue 35): kept with the verdict, so the leaderboard and a later reader can tell which rule a figure was judged by.

Revision ID: 0012
Revises: 0011
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("evaluations") as batch:
        batch.add_column(sa.Column("torch_rule", sa.String(32), nullable=True))
        batch.add_column(sa.Column("torch_share", sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("evaluations") as batch:
        batch.drop_column("torch_share")
        batch.drop_column("torch_rule")
