"""A worker's database role needs no superuser: the store creates its tables, records a run and its results, reads
them back and takes a job from the queue as a login role without SUPERUSER, CREATEDB or CREATEROLE that owns only its schema (docs/EVALUATOR.md,
"The sandbox, resource by resource"). PostgreSQL only: skipped where $OPFORGE_TEST_PG_URL is unset (CI sets it)."""

from __future__ import annotations

import secrets
from urllib.parse import urlsplit, urlunsplit

import pytest
from store_fixtures import _pg_admin, make_task, ok_result, pg_base_url, pg_schema_url

from evaluator.candidate import Candidate
from store import get_store


def test_the_store_works_as_a_role_without_superuser():
    base = pg_base_url()
    if base is None:
        pytest.skip("PostgreSQL store tests need $OPFORGE_TEST_PG_URL (e.g. postgresql://postgres@127.0.0.1:5432/test)")
    role, password = f"opforge_worker_{secrets.token_hex(6)}", secrets.token_hex(16)
    _pg_admin(base, f"CREATE ROLE {role} LOGIN PASSWORD '{password}' NOSUPERUSER NOCREATEDB NOCREATEROLE")
    try:
        _pg_admin(base, f'CREATE SCHEMA "{role}" AUTHORIZATION {role}')
        parts = urlsplit(base)
        url = pg_schema_url(urlunsplit(parts._replace(netloc=f"{role}:{password}@{parts.hostname}:{parts.port or 5432}")),
                            role)
        store = get_store(url)
        try:
            task = store.add_task(make_task())
            run = store.create_run(task.id, config={}, budget={"max_evals": 1})
            cand, _ = store.add_candidate(run.id, task.id, Candidate.from_source("x = 1"))
            store.add_result(cand.id, run.id, ok_result(2.0))
            assert [sc.result.speedup for sc in store.history(run.id) if sc.result] == [pytest.approx(2.0)]
            job = store.submit_job(run.id)  # the queue of `opforge worker`
            claimed = store.claim_job("worker-1", lease_s=30)
            assert claimed is not None and claimed.id == job.id
            store.heartbeat_job(job.id, "worker-1", lease_s=30)
        finally:
            store.close()
        import psycopg
        with psycopg.connect(urlunsplit(parts._replace(netloc=f"{role}:{password}@{parts.hostname}:{parts.port or 5432}")
                                        ).replace("postgresql+psycopg://", "postgresql://")) as conn:
            assert conn.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user").fetchone() == (False,)
    finally:
        _pg_admin(base, f'DROP SCHEMA IF EXISTS "{role}" CASCADE')
        _pg_admin(base, f"DROP ROLE IF EXISTS {role}")
