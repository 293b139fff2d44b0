"""LLM accounting: calls linked to the candidate they produced or judged, with their outcome; token and wall-time
totals per run.

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("llm_calls") as batch:
        batch.add_column(sa.Column("candidate_digest", sa.String(64), nullable=True))
        batch.add_column(sa.Column("outcome", sa.String(32), nullable=False, server_default="ok"))
        batch.add_column(sa.Column("problem", sa.Text(), nullable=False, server_default=""))
        batch.add_column(sa.Column("attempts", sa.Integer(), nullable=False, server_default="1"))
    op.create_index("ix_llm_calls_candidate_id", "llm_calls", ["candidate_id"])
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("tokens_in", sa.BigInteger(), nullable=False, server_default="0"))
        batch.add_column(sa.Column("tokens_out", sa.BigInteger(), nullable=False, server_default="0"))
        batch.add_column(sa.Column("wall_s", sa.Float(), nullable=False, server_default="0"))


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("wall_s")
        batch.drop_column("tokens_out")
        batch.drop_column("tokens_in")
    op.drop_index("ix_llm_calls_candidate_id", table_name="llm_calls")
    with op.batch_alter_table("llm_calls") as batch:
        batch.drop_column("attempts")
        batch.drop_column("problem")
        batch.drop_column("outcome")
        batch.drop_column("candidate_digest")
