"""`opforge jobs`: the work queue — each job's state, worker, progress and best speedup."""

from __future__ import annotations

import argparse
import json
import sys

from opforge.cli.flags import add_db_argument, open_store
from opforge.errors import UsageError
from opforge.display import format_speedup
from opforge.reports.jobs import job_rows
from store import JobState, StoreError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("jobs", help="list queued, running and finished jobs",
                       description="List the store's jobs (see `opforge submit` and `opforge worker`): state "
                                   "(queued, running, done, failed, cancelled), task, priority, the worker holding "
                                   "it, its run's backend, what a worker's machine needs to claim it (cpu, gpu or any) and progress (evaluated/budget), best speedup and age.")
    add_db_argument(p)
    p.add_argument("--state", action="append", choices=[s.value for s in JobState], metavar="STATE",
                   help="only jobs in this state (repeatable): " + ", ".join(s.value for s in JobState))
    p.add_argument("--json", action="store_true", help='print one JSON object: {"jobs": [...]}')
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    store = open_store(args.db)
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
    print(f"{'job':>5}  {'state':<10} {'task':<16} {'backend':<7} {'needs':<5} {'prio':>4}  {'worker':<20} {'progress':>9}  "
          f"{'best':>8}  {'age':>5}")
    for r in rows:
        done = f"{r['evaluated']}/{r['budget'] if r['budget'] is not None else '?'}"
        print(f"{r['job_id']:>5}  {r['state']:<10} {r['task'][:16]:<16} {r['backend']:<7} {r['requires']:<5} "
              f"{r['priority']:>4}  "
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
