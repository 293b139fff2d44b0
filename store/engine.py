"""From a user's URL (or file path) to a configured SQLAlchemy engine: SQLite with WAL, or PostgreSQL via psycopg 3."""

from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import URL, Connection, make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, IntegrityError, NoSuchModuleError
from sqlalchemy.orm import Session
from sqlalchemy.pool import StaticPool

from store.errors import StoreError

DEFAULT_URL = "sqlite:///./opforge.db"
ENV_VAR = "OPFORGE_DB"
SQLITE_BUSY_TIMEOUT_MS = 30_000
PG_CONNECT_TIMEOUT_S = 10
WRITE_OPTION = "opforge_write"


def resolve_url(url: str | None) -> URL:
    """None -> $OPFORGE_DB -> ./opforge.db; a plain path means a SQLite file; postgresql:// means psycopg 3."""
    raw = (url if url is not None else os.environ.get(ENV_VAR) or DEFAULT_URL).strip()
    if not raw:
        raise StoreError("The database URL is empty; give a URL such as sqlite:///opforge.db or a file path.")
    if "://" not in raw:
        return URL.create("sqlite", database=str(Path(raw).expanduser()))
    try:
        parsed = make_url(raw)
    except ArgumentError:
        hint = "use sqlite:///path/to/file.db or postgresql://host/db"
        raise StoreError(f"{raw!r} is not a database URL; {hint}.") from None
    backend = parsed.get_backend_name()
    if backend == "postgres":
        parsed = parsed.set(drivername="postgresql")
        backend = "postgresql"
    if backend == "postgresql" and ("+" not in parsed.drivername or parsed.get_driver_name() == "psycopg2"):
        parsed = parsed.set(drivername="postgresql+psycopg")  # the driver we ship: psycopg 3
    if backend not in ("sqlite", "postgresql"):
        raise StoreError(f"{display(parsed)} uses {backend}; opforge stores are SQLite or PostgreSQL databases.")
    return parsed


def display(url: URL) -> str:
    """The URL as a user would type it: password hidden, the default driver left out."""
    if url.drivername == "postgresql+psycopg":
        url = url.set(drivername="postgresql")
    return url.render_as_string(hide_password=True)


def make_engine(url: URL) -> Engine:
    try:
        if url.get_backend_name() == "sqlite":
            return _sqlite_engine(url)
        connect_args = {} if "connect_timeout" in url.query else {"connect_timeout": PG_CONNECT_TIMEOUT_S}
        return create_engine(url, pool_pre_ping=True, connect_args=connect_args)
    except (ArgumentError, NoSuchModuleError, ImportError) as exc:
        raise StoreError(f"Cannot use the database URL {display(url)}: {_first_line(exc)}.") from None


def _sqlite_engine(url: URL) -> Engine:
    memory = url.database in (None, "", ":memory:")
    if not memory:
        parent = Path(str(url.database)).expanduser().resolve().parent
        if not parent.is_dir():
            raise StoreError(f"Cannot open the database {display(url)}: the folder {parent} does not exist.")
    kwargs: dict = {"connect_args": {"timeout": SQLITE_BUSY_TIMEOUT_MS / 1000, "check_same_thread": False}}
    if memory:
        kwargs["poolclass"] = StaticPool
    engine = create_engine(url, **kwargs)

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn, _record) -> None:  # noqa: ANN001 - DBAPI objects
        dbapi_conn.isolation_level = None  # we emit BEGIN ourselves (see _on_begin)
        cur = dbapi_conn.cursor()
        if not memory:
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA synchronous=NORMAL")
        cur.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
        cur.execute("PRAGMA foreign_keys=ON")
        cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        # A writer takes SQLite's write lock up front, so the busy timeout applies instead of a stale-snapshot error.
        conn.exec_driver_sql("BEGIN IMMEDIATE" if conn.get_execution_options().get(WRITE_OPTION) else "BEGIN")

    return engine


def check_reachable(engine: Engine) -> None:
    try:
        with engine.connect() as conn:
            conn.exec_driver_sql("SELECT 1")
    except DBAPIError as exc:
        raise StoreError(f"Cannot open the database {display(engine.url)}: {_first_line(exc.orig or exc)}.") from None


@contextmanager
def session_scope(engine: Engine, *, write: bool = False) -> Iterator[Session]:
    """One transaction: committed on success, rolled back on error; `write` takes SQLite's lock immediately."""
    try:
        conn = engine.connect()
    except DBAPIError as exc:
        raise StoreError(f"Cannot reach the database {display(engine.url)}: {_first_line(exc.orig or exc)}.") from None
    with conn:
        if write:
            conn.execution_options(**{WRITE_OPTION: True})
        try:
            with Session(bind=conn, expire_on_commit=False) as session, session.begin():
                yield session
        except IntegrityError as exc:
            why = _first_line(exc.orig or exc)
            raise StoreError(f"The database {display(engine.url)} refused a write: {why}.") from None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return (text[0] if text else exc.__class__.__name__).rstrip(".")
