"""Alembic environment for the opforge store, configured programmatically by `store.schema` (no alembic.ini)."""

from __future__ import annotations

from alembic import context

from store.rows import Base

config = context.config
connection = config.attributes.get("connection")
if connection is None:  # pragma: no cover - store.schema always passes a connection
    raise RuntimeError("store migrations run through store.upgrade(url), which supplies the connection")

context.configure(connection=connection, target_metadata=Base.metadata, render_as_batch=True, compare_type=True)
with context.begin_transaction():
    context.run_migrations()
