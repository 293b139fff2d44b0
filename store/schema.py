"""Schema versions: Alembic migrations shipped in `store/migrations`, applied programmatically (no alembic.ini)."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from alembic.util.exc import CommandError
from sqlalchemy import Engine, inspect

from store.engine import WRITE_OPTION, check_reachable, display, make_engine, resolve_url
from store.errors import StoreError
from store.rows import Base

MIGRATIONS = Path(__file__).resolve().parent / "migrations"
VERSION_TABLE = "alembic_version"
_PG_LOCK_KEY = 0x6F70666F  # "opfo": serialises concurrent migrations of one PostgreSQL database


def alembic_config() -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    return cfg


def head_revision() -> str:
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert head is not None, "store/migrations holds no revision"
    return head


def current_revision(engine: Engine) -> str | None:
    with engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


def upgrade(url: str | None = None, revision: str = "head") -> str:
    """Bring the database at `url` up to `revision` (default: the code's head); returns the revision reached."""
    engine = make_engine(resolve_url(url))
    try:
        check_reachable(engine)
        migrate(engine, revision)
        return current_revision(engine) or ""
    finally:
        engine.dispose()


def migrate(engine: Engine, revision: str = "head") -> None:
    cfg = alembic_config()
    try:
        with engine.connect() as conn:
            conn.execution_options(**{WRITE_OPTION: True})  # SQLite: BEGIN IMMEDIATE, so two openers take turns
            with conn.begin():
                if conn.dialect.name == "postgresql":
                    conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({_PG_LOCK_KEY})")
                cfg.attributes["connection"] = conn
                command.upgrade(cfg, revision)
    except CommandError as exc:
        raise StoreError(f"Cannot upgrade the database {display(engine.url)}: {exc}.") from None


def ensure_current(engine: Engine) -> None:
    """Create a brand-new database; refuse one whose schema is older or newer than this code, with what to do."""
    where = display(engine.url)
    with engine.connect() as conn:
        tables = set(inspect(conn).get_table_names())
        revision = MigrationContext.configure(conn).get_current_revision() if VERSION_TABLE in tables else None
    ours = tables & set(Base.metadata.tables)
    if revision is None:
        if ours:
            raise StoreError(
                f"The database {where} has opforge tables but no schema version; "
                f"it was not created by opforge, so give a different --db."
            )
        migrate(engine)
        return
    head = head_revision()
    if revision == head:
        return
    script = ScriptDirectory.from_config(alembic_config())
    known = {s.revision for s in script.walk_revisions()}
    if revision in known:
        raise StoreError(
            f"The database {where} has schema version {revision} but this opforge needs {head}; "
            f"run `opforge db upgrade --db {where}` to upgrade it."
        )
    raise StoreError(
        f"The database {where} has schema version {revision}, which is newer than this opforge knows; "
        f"upgrade opforge to open it."
    )
