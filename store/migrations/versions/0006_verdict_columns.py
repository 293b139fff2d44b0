"""Verdict columns the store used to drop: the torch.compile baseline's timing and the candidate's backend. A run's
`gpu_s` becomes `worker_s` (what it always measured: seconds a worker slot was held, submit to verdict, builds
included), and `evaluated` counts the run's finished queue items (one definition, see store/writes.py).

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("evaluations") as batch:
        batch.add_column(sa.Column("compiled_reference_median_ms", sa.Float(), nullable=True))
        batch.add_column(sa.Column("compiled_reference_iqr_ms", sa.Float(), nullable=True))
        batch.add_column(sa.Column("compiled_reference_reps", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("backend", sa.String(32), nullable=True))
    # A plain RENAME COLUMN (SQLite 3.25+, PostgreSQL): a batch copy of `runs` would drop a table that candidates,
    # verdicts and jobs point at, which SQLite's foreign keys refuse.
    op.execute("ALTER TABLE runs RENAME COLUMN gpu_s TO worker_s")
    # Older stores counted new verdict rows only; a run that re-measured a stored kernel counted nothing for it.
    op.execute("UPDATE runs SET evaluated = (SELECT count(*) FROM queue_items q WHERE q.run_id = runs.id "
               "AND q.state = 'done') WHERE EXISTS (SELECT 1 FROM queue_items q WHERE q.run_id = runs.id)")


def downgrade() -> None:
    op.execute("ALTER TABLE runs RENAME COLUMN worker_s TO gpu_s")
    with op.batch_alter_table("evaluations") as batch:
        batch.drop_column("backend")
        batch.drop_column("compiled_reference_reps")
        batch.drop_column("compiled_reference_iqr_ms")
        batch.drop_column("compiled_reference_median_ms")
