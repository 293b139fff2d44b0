"""The queue as people read it: one row per job with its run's backend and progress (`opforge jobs`, the dashboard)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from opforge.run.config import stored_backend
from store import JobRecord, Store


def job_rows(store: Store, jobs: list[JobRecord], now: datetime | None = None) -> list[dict[str, Any]]:
    """One JSON-ready dict per job, with its run's progress."""
    now = now or datetime.now(UTC)
    names: dict[int, str] = {}
    rows = []
    for job in jobs:
        if job.task_id not in names:
            names[job.task_id] = store.get_task(job.task_id).name
        run = store.get_run(job.run_id)
        totals = store.run_totals(job.run_id)
        rows.append({
            "job_id": job.id, "state": job.state.value, "task": names[job.task_id], "priority": job.priority,
            "worker": job.worker, "run_id": job.run_id, "backend": stored_backend(run.config),
            "requires": job.requires,
            "evaluated": totals.evaluated,
            "budget": run.budget.get("max_candidates"), "best_speedup": totals.best_speedup,
            "run_status": run.status.value, "attempts": job.attempts, "error": job.error,
            "created_at": _iso(job.created_at), "started_at": _iso(job.started_at),
            "finished_at": _iso(job.finished_at), "heartbeat_at": _iso(job.heartbeat_at),
            "lease_expires_at": _iso(job.lease_expires_at), "age_s": round((now - job.created_at).total_seconds(), 1),
        })
    return rows


def _iso(ts: datetime | None) -> str | None:
    return None if ts is None else ts.isoformat(timespec="seconds")
