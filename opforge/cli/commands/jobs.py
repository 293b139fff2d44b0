"""`opforge jobs`: the work queue — each job's state, worker, progress and best speedup."""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime
from typing import Any

from opforge.errors import UsageError
from opforge.display import format_speedup
from store import JobRecord, JobState, Store, StoreError, get_store


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("jobs", help="list queued, running and finished jobs",
                       description="List the store's jobs (see `opforge submit` and `opforge worker`): state "
                                   "(queued, running, done, failed, cancelled), task, priority, the worker holding "
                                   "it, progress (evaluated/budget of its run), best speedup and age.")
    p.add_argument("--db", metavar="URL", help="the store (default $OPFORGE_DB, else ./opforge.db)")
    p.add_argument("--state", action="append", choices=[s.value for s in JobState], metavar="STATE",
                   help="only jobs in this state (repeatable): " + ", ".join(s.value for s in JobState))
    p.add_argument("--json", action="store_true", help='print one JSON object: {"jobs": [...]}')
    p.set_defaults(run=run)


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
            "worker": job.worker, "run_id": job.run_id, "evaluated": totals.evaluated,
            "budget": run.budget.get("max_candidates"), "best_speedup": totals.best_speedup,
            "run_status": run.status.value, "attempts": job.attempts, "error": job.error,
            "created_at": _iso(job.created_at), "started_at": _iso(job.started_at),
            "finished_at": _iso(job.finished_at), "heartbeat_at": _iso(job.heartbeat_at),
            "lease_expires_at": _iso(job.lease_expires_at), "age_s": round((now - job.created_at).total_seconds(), 1),
        })
    return rows


def run(args: argparse.Namespace) -> int:
    try:
        store = get_store(args.db)
    except StoreError as exc:
        raise UsageError(str(exc)) from None
    try:
        rows = job_rows(store, store.list_jobs(args.state))
    except StoreError as exc:
        raise UsageError(str(exc)) from None
    finally:
        store.close()
    if args.json:
        print(json.dumps({"jobs": rows}))
        return 0
    if not rows:
        which = f" {'/'.join(args.state)}" if args.state else ""
        print(f"no{which} jobs in {store.url}; queue one with: opforge submit TASK", file=sys.stderr)
        return 0
    print(f"{'job':>5}  {'state':<10} {'task':<16} {'prio':>4}  {'worker':<20} {'progress':>9}  {'best':>8}  "
          f"{'age':>5}")
    for r in rows:
        done = f"{r['evaluated']}/{r['budget'] if r['budget'] is not None else '?'}"
        print(f"{r['job_id']:>5}  {r['state']:<10} {r['task'][:16]:<16} {r['priority']:>4}  "
              f"{(r['worker'] or '-')[:20]:<20} {done:>9}  {format_speedup(r['best_speedup']):>8}  "
              f"{format_age(r['age_s']):>5}")
    for r in rows:
        if r["error"]:
            print(f"job {r['job_id']} failed: {r['error']}")
    return 0


def format_age(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f}{unit}"
    return f"{max(0.0, seconds):.0f}s"


def _iso(ts: datetime | None) -> str | None:
    return None if ts is None else ts.isoformat(timespec="seconds")
