"""The SQL store: tasks, runs, candidates, verdicts, the run's queue and LLM calls (SQLite or PostgreSQL).

    store = get_store("sqlite:///opforge.db")        # or a file path, or postgresql://..., or None for $OPFORGE_DB
    task = store.add_task(load_task("softmax.py"))
    run = store.create_run(task.id, config={...}, budget={"max_candidates": 200})  # opforge.run.search.Budget
    record, new = store.add_candidate(run.id, task.id, candidate, generation=0, island=0)
"""

from __future__ import annotations

from store.engine import DEFAULT_URL, ENV_VAR, check_reachable, make_engine, resolve_url
from store.errors import StoreError, UnknownId
from store.records import (
    ArchiveEntry,
    BenchRecord,
    CandidateRecord,
    ConfirmationRecord,
    ConfirmedSpeedup,
    DevicePeaks,
    EvaluationRecord,
    JobRecord,
    JobState,
    LLMCallRecord,
    LLMUsage,
    QueueState,
    RunRecord,
    RunStatus,
    RunTotals,
    ScoredCandidate,
    TaskRecord,
)
from store.schema import ensure_current, head_revision, upgrade
from store.sql_store import Store


def get_store(url: str | None = None) -> Store:
    """Open the store at `url` (None: $OPFORGE_DB, else ./opforge.db); a brand-new database is created.

    Raises StoreError (one readable sentence naming the URL) for a bad URL, an unreachable database, or a schema
    that this code cannot use as it is (`opforge db upgrade --db URL` upgrades an older one).
    """
    engine = make_engine(resolve_url(url))
    try:
        check_reachable(engine)
        ensure_current(engine)
    except BaseException:
        engine.dispose()
        raise
    return Store(engine)


__all__ = [
    "ArchiveEntry", "BenchRecord", "DEFAULT_URL", "ENV_VAR", "CandidateRecord", "ConfirmationRecord", "ConfirmedSpeedup", "DevicePeaks", "EvaluationRecord",
    "JobRecord", "JobState", "LLMCallRecord", "LLMUsage", "QueueState", "RunRecord",
    "RunStatus", "RunTotals", "ScoredCandidate", "Store", "StoreError", "TaskRecord", "UnknownId", "get_store",
    "head_revision", "upgrade",
]
