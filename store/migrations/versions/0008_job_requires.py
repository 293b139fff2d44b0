"""What a job's machine must have: `cpu` (native CPU kernels), `gpu` (CUDA kernels, or Triton meant for a GPU) or
`any` (Triton a CPU may check under its interpreter). A worker claims only the jobs its machine can run. Jobs queued
before this revision need `any`, as every worker could claim them then.

Revision ID: 0008
Revises: 0007
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("requires", sa.String(8), nullable=False, server_default="any"))
        batch.create_check_constraint(op.f("ck_jobs_requires"), "requires IN ('any', 'cpu', 'gpu')")


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.drop_constraint(op.f("ck_jobs_requires"), type_="check")
        batch.drop_column("requires")
