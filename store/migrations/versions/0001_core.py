"""Core tables: tasks, runs, candidates, evaluations and the run's queue of in-flight evaluations.

Revision ID: 0001
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def _created(name: str = "created_at") -> sa.Column:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=False)


def upgrade() -> None:
    op.create_table(
        "tasks",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("source", sa.Text(), nullable=False),
        sa.Column("digest", sa.String(64), nullable=False),
        sa.Column("path", sa.Text(), nullable=True),
        _created(),
        sa.PrimaryKeyConstraint("id", name="pk_tasks"),
        sa.UniqueConstraint("digest", name="uq_tasks_digest"),
    )
    op.create_table(
        "runs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("task_id", sa.Integer(), nullable=False),
        sa.Column("config", sa.JSON(), nullable=False),
        sa.Column("budget", sa.JSON(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("evaluated", sa.Integer(), nullable=False),
        sa.Column("gpu_s", sa.Float(), nullable=False),
        sa.Column("cost_usd", sa.Float(), nullable=False),
        _created(),
        _created("updated_at"),
        sa.PrimaryKeyConstraint("id", name="pk_runs"),
        sa.ForeignKeyConstraint(["task_id"], ["tasks.id"], name="fk_runs_task_id_tasks"),
        sa.CheckConstraint("status IN ('running', 'done', 'failed', 'interrupted')", name="ck_runs_status"),
    )
    op.create_index("ix_runs_task_id", "runs", ["task_id"])
    op.create_table(
        "candidates",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("task_id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=True),
        sa.Column("source", sa.Text(), nullable=False),
        sa.Column("digest", sa.String(64), nullable=False),
        sa.Column("parents", sa.JSON(), nullable=False),
        sa.Column("generation", sa.Integer(), nullable=False),
        sa.Column("island", sa.Integer(), nullable=False),
        sa.Column("origin", sa.String(128), nullable=False),
        sa.Column("note", sa.Text(), nullable=False),
        _created(),
        sa.PrimaryKeyConstraint("id", name="pk_candidates"),
        sa.UniqueConstraint("digest", "task_id", name="uq_candidates_digest_task_id"),
        sa.ForeignKeyConstraint(["task_id"], ["tasks.id"], name="fk_candidates_task_id_tasks"),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], name="fk_candidates_run_id_runs"),
    )
    op.create_index("ix_candidates_run_id", "candidates", ["run_id"])
    op.create_table(
        "evaluations",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("candidate_id", sa.Integer(), nullable=False),
        sa.Column("task_id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=True),
        sa.Column("status", sa.String(32), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("candidate_median_ms", sa.Float(), nullable=True),
        sa.Column("candidate_iqr_ms", sa.Float(), nullable=True),
        sa.Column("candidate_reps", sa.Integer(), nullable=True),
        sa.Column("reference_median_ms", sa.Float(), nullable=True),
        sa.Column("reference_iqr_ms", sa.Float(), nullable=True),
        sa.Column("reference_reps", sa.Integer(), nullable=True),
        sa.Column("speedup", sa.Float(), nullable=True),
        sa.Column("max_abs_error", sa.Float(), nullable=True),
        sa.Column("max_rel_error", sa.Float(), nullable=True),
        sa.Column("peak_memory_bytes", sa.BigInteger(), nullable=True),
        sa.Column("reference_peak_memory_bytes", sa.BigInteger(), nullable=True),
        sa.Column("energy_j", sa.Float(), nullable=True),
        sa.Column("power_w", sa.Float(), nullable=True),
        sa.Column("suspicious", sa.Boolean(), nullable=False),
        sa.Column("device_kind", sa.String(32), nullable=False),
        sa.Column("device_name", sa.String(255), nullable=False),
        sa.Column("device", sa.JSON(), nullable=False),
        sa.Column("profile", sa.JSON(), nullable=False),
        sa.Column("trials", sa.JSON(), nullable=False),
        sa.Column("log", sa.Text(), nullable=False),
        _created(),
        sa.PrimaryKeyConstraint("id", name="pk_evaluations"),
        sa.UniqueConstraint("candidate_id", "device_name", name="uq_evaluations_candidate_id_device_name"),
        sa.ForeignKeyConstraint(["candidate_id"], ["candidates.id"], name="fk_evaluations_candidate_id_candidates"),
        sa.ForeignKeyConstraint(["task_id"], ["tasks.id"], name="fk_evaluations_task_id_tasks"),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], name="fk_evaluations_run_id_runs"),
    )
    op.create_index("ix_evaluations_run_id", "evaluations", ["run_id"])
    op.create_index("ix_evaluations_top", "evaluations", ["task_id", "status", "speedup", "id"])
    op.create_table(
        "queue_items",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("candidate_id", sa.Integer(), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        _created(),
        _created("updated_at"),
        sa.PrimaryKeyConstraint("id", name="pk_queue_items"),
        sa.UniqueConstraint("run_id", "candidate_id", name="uq_queue_items_run_id_candidate_id"),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], name="fk_queue_items_run_id_runs"),
        sa.ForeignKeyConstraint(["candidate_id"], ["candidates.id"], name="fk_queue_items_candidate_id_candidates"),
        sa.CheckConstraint("state IN ('queued', 'running', 'done')", name="ck_queue_items_state"),
    )
    op.create_index("ix_queue_items_candidate_id", "queue_items", ["candidate_id"])
    op.create_index("ix_queue_items_claim", "queue_items", ["run_id", "state", "id"])


def downgrade() -> None:
    for table in ("queue_items", "evaluations", "candidates", "runs", "tasks"):
        op.drop_table(table)
