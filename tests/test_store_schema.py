"""Schema management and opening databases: migrations agree with the rows, old schemas are refused with the fix,
and a bad URL or unreachable server is one readable sentence."""

from __future__ import annotations

import sqlite3

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import inspect, text
from store_fixtures import db_url, make_task, pg_url, sqlite_url

from store import StoreError, get_store, head_revision, upgrade
from store.engine import make_engine, resolve_url
from store.rows import Base

__all__ = ["db_url", "pg_url", "sqlite_url"]  # fixtures


def test_migrations_create_exactly_the_rows_schema(db_url: str) -> None:
    assert upgrade(db_url) == head_revision()
    engine = make_engine(resolve_url(db_url))
    try:
        with engine.connect() as conn:
            ctx = MigrationContext.configure(conn, opts={"compare_type": True})
            assert compare_metadata(ctx, Base.metadata) == []
            tables = set(inspect(conn).get_table_names())
    finally:
        engine.dispose()
    assert tables == set(Base.metadata.tables) | {"alembic_version"}


def test_a_new_database_is_created_at_the_head_revision(db_url: str) -> None:
    with get_store(db_url) as store:
        store.add_task(make_task())
    with get_store(db_url) as store:  # opening it again finds it current
        assert [t.id for t in [store.get_task(1)]] == [1]
    assert upgrade(db_url) == head_revision()  # upgrading a current database is a no-op


def test_an_older_schema_is_refused_with_the_upgrade_command(db_url: str) -> None:
    assert upgrade(db_url, revision="0001") == "0001"
    with pytest.raises(StoreError) as info:
        get_store(db_url)
    message = str(info.value)
    shown = db_url.split("://", 1)[1]  # the URL as given (PostgreSQL: the driver name is left out)
    assert "run `opforge db upgrade --db " in message and shown in message
    assert "\n" not in message and message.endswith(".")

    assert upgrade(db_url) == head_revision()
    with get_store(db_url) as store:
        assert store.record_llm_call(None, "coder", "m", "p", "r").id == 1


def test_a_schema_from_a_newer_opforge_is_refused(db_url: str) -> None:
    upgrade(db_url)
    engine = make_engine(resolve_url(db_url))
    with engine.begin() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = '9999'"))
    engine.dispose()
    with pytest.raises(StoreError, match="newer than this opforge knows; upgrade opforge to open it"):
        get_store(db_url)


def test_foreign_tables_without_a_version_are_refused(sqlite_url: str) -> None:
    path = sqlite_url.removeprefix("sqlite:///")
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE tasks (id INTEGER PRIMARY KEY)")
    with pytest.raises(StoreError, match="not created by opforge"):
        get_store(sqlite_url)


def test_sqlite_uses_wal_and_a_busy_timeout(sqlite_url: str) -> None:
    get_store(sqlite_url).close()
    with sqlite3.connect(sqlite_url.removeprefix("sqlite:///")) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    engine = make_engine(resolve_url(sqlite_url))
    with engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() >= 5000
        assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
    engine.dispose()


def test_url_defaults_env_and_plain_paths(tmp_path, monkeypatch) -> None:  # noqa: ANN001 - pytest fixtures
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("OPFORGE_DB", raising=False)
    get_store(None).close()
    assert (tmp_path / "opforge.db").is_file()

    monkeypatch.setenv("OPFORGE_DB", str(tmp_path / "from_env.db"))
    get_store(None).close()
    assert (tmp_path / "from_env.db").is_file()

    with get_store(str(tmp_path / "plain.db")) as store:
        assert store.url == f"sqlite:///{tmp_path / 'plain.db'}" and store.dialect == "sqlite"
    assert resolve_url("postgresql://u@h/db").drivername == "postgresql+psycopg"
    assert resolve_url("postgres://u@h/db").drivername == "postgresql+psycopg"


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("postgresql://postgres:secret@127.0.0.1:1/test",
         "Cannot open the database postgresql://postgres:***@127.0.0.1:1/test: "),
        ("mysql://u@h/db", "mysql://u@h/db uses mysql; opforge stores are SQLite or PostgreSQL databases."),
        ("sqlite:////no/such/folder/x.db", "Cannot open the database sqlite:////no/such/folder/x.db: the folder"),
        ("://nonsense", "'://nonsense' is not a database URL"),
        ("   ", "The database URL is empty"),
    ],
)
def test_bad_urls_are_one_readable_sentence(url: str, expected: str) -> None:
    with pytest.raises(StoreError) as info:
        get_store(url)
    message = str(info.value)
    assert message.startswith(expected)
    assert "\n" not in message and "Traceback" not in message and "secret" not in message


def test_a_missing_postgres_database_names_the_url(pg_url: str) -> None:
    url = pg_url.split("?")[0].rsplit("/", 1)[0] + "/opforge_no_such_db"
    expected = r"Cannot open the database postgresql://.*/opforge_no_such_db: .*does not exist"
    with pytest.raises(StoreError, match=expected):
        get_store(url)


def test_revision_0006_keeps_worker_time_and_counts_evaluated_from_the_queue(db_url: str) -> None:
    """A 0005 store whose run re-measured a kernel another run held (no verdict row of its own, so its old count said
    0) reads back after the upgrade with that evaluation counted, and gpu_s kept as worker_s."""
    assert upgrade(db_url, revision="0005") == "0005"
    engine = make_engine(resolve_url(db_url))
    now = "2026-11-23 12:00:00"
    with engine.begin() as conn:
        conn.execute(text("INSERT INTO tasks (id, name, source, digest, created_at) VALUES (1, 't', 's', 'd', :now)"),
                     {"now": now})
        for run_id, evaluated in ((1, 1), (2, 0)):
            conn.execute(text("INSERT INTO runs (id, task_id, config, budget, status, evaluated, gpu_s, cost_usd, "
                              "created_at, updated_at) VALUES (:id, 1, '{}', '{}', 'done', :ev, 2.5, 0, :now, :now)"),
                         {"id": run_id, "ev": evaluated, "now": now})
        conn.execute(text("INSERT INTO candidates (id, task_id, run_id, source, digest, parents, generation, island, "
                          "origin, note, created_at) VALUES (1, 1, 1, 'x', 'c', '[]', 0, 0, 'seed', '', :now)"),
                     {"now": now})
        for item_id, run_id in ((1, 1), (2, 2)):
            conn.execute(text("INSERT INTO queue_items (id, run_id, candidate_id, state, attempts, created_at, "
                              "updated_at) VALUES (:id, :run, 1, 'done', 1, :now, :now)"),
                         {"id": item_id, "run": run_id, "now": now})
    engine.dispose()
    assert upgrade(db_url) == head_revision()
    with get_store(db_url) as store:
        first, second = store.get_run(1), store.get_run(2)
        assert (first.evaluated, second.evaluated) == (1, 1)
        assert first.worker_s == second.worker_s == 2.5
