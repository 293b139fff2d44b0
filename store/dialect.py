"""The two places the SQL differs between SQLite and PostgreSQL: INSERT ... ON CONFLICT and row locking."""

from __future__ import annotations

from typing import Any

from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session


def is_postgres(session: Session) -> bool:
    return session.get_bind().dialect.name == "postgresql"


def insert(session: Session, target: Any) -> Any:
    """An INSERT that supports `.on_conflict_do_nothing(index_elements=...)` on either backend."""
    return (postgresql.insert if is_postgres(session) else sqlite.insert)(target)
