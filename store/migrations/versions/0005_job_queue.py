"""The job queue: a job drives one run (run_id), states queued / running / done / failed / cancelled, attempts,
the error of a failed job, and when it was started, finished and last changed.

0002 created `jobs` as a placeholder that no opforge version wrote to, so the table is replaced rather than altered
(its rows could not be kept anyway: each job now needs its run). Downgrading drops the queue's jobs.

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.drop_index("ix_jobs_claim", table_name="jobs")
    op.drop_table("jobs")
    op.create_table(
        "jobs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("task_id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("config", sa.JSON(), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("priority", sa.Integer(), nullable=False),
        sa.Column("worker", sa.String(255), nullable=True),
        sa.Column("lease_expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("heartbeat_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("error", sa.Text(), nullable=False, server_default=""),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_jobs"),
        sa.ForeignKeyConstraint(["task_id"], ["tasks.id"], name="fk_jobs_task_id_tasks"),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], name="fk_jobs_run_id_runs"),
        sa.UniqueConstraint("run_id", name="uq_jobs_run_id"),
        # op.f: the name as written (0001-0004 let the naming convention prefix theirs a second time).
        sa.CheckConstraint("state IN ('queued', 'running', 'done', 'failed', 'cancelled')", name=op.f("ck_jobs_state")),
    )
    op.create_index("ix_jobs_claim", "jobs", ["state", "priority", "id"])


def downgrade() -> None:
    op.drop_index("ix_jobs_claim", table_name="jobs")
    op.drop_table("jobs")
    op.create_table(
        "jobs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("task_id", sa.Integer(), nullable=False),
        sa.Column("config", sa.JSON(), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("priority", sa.Integer(), nullable=False),
        sa.Column("worker", sa.String(255), nullable=True),
        sa.Column("lease_expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("heartbeat_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_jobs"),
        sa.ForeignKeyConstraint(["task_id"], ["tasks.id"], name="fk_jobs_task_id_tasks"),
        sa.CheckConstraint("state IN ('queued', 'leased', 'done', 'failed')", name="ck_jobs_state"),
    )
    op.create_index("ix_jobs_claim", "jobs", ["state", "priority", "id"])
