"""`opforge runs` lists the store's runs; `opforge show RUN_ID` shows one: best candidates, Pareto front, lineage.

Both commands live here because both read runs; this module registers two sub-commands.
"""

from __future__ import annotations

import argparse
import json
import sys

from opforge.cli.flags import add_db_argument, open_store
from opforge.errors import UsageError
from opforge.run.config import stored_backend
from opforge.display import format_speedup
from opforge.reports.run_summary import run_report
from store import StoreError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("runs", help="list optimisation runs", description="List the runs recorded in the store.")
    add_db_argument(p)
    p.add_argument("--json", action="store_true", help='print one JSON object: {"runs": [...]}')
    p.set_defaults(run=run_list)

    s = sub.add_parser("show", help="show one run: best candidates, Pareto front, lineage of the best",
                       description="Show a run's best candidates, its Pareto front (speedup, energy, peak memory) "
                                   "and the lineage of its best candidate: each parent and the change that made the "
                                   "child.")
    s.add_argument("run_id", type=int, metavar="RUN_ID")
    add_db_argument(s)
    s.add_argument("--json", action="store_true", help="print one JSON object")
    s.add_argument("--source", action="store_true", help="print the best candidate's source code instead")
    s.set_defaults(run=run_show)


def run_list(args: argparse.Namespace) -> int:
    store = open_store(args.db)
    try:
        rows = []
        task_names: dict[int, str] = {}
        for r in store.list_runs():
            if r.task_id not in task_names:
                task_names[r.task_id] = store.get_task(r.task_id).name
            totals = store.run_totals(r.id)
            rows.append({"run_id": r.id, "task": task_names[r.task_id], "status": r.status.value,
                         "backend": stored_backend(r.config),
                         "evaluated": totals.evaluated, "budget": r.budget.get("max_candidates"),
                         "best_speedup": totals.best_speedup, "worker_s": r.worker_s,
                         "created_at": r.created_at.isoformat(timespec="seconds")})
    except StoreError as exc:
        raise UsageError(str(exc)) from None
    finally:
        store.close()
    if args.json:
        print(json.dumps({"runs": rows}))
        return 0
    if not rows:
        print(f"no runs yet in {store.url}; start one with: opforge optimize TASK", file=sys.stderr)
        return 0
    print(f"{'run':>5}  {'task':<16} {'status':<12} {'evaluated':>9}  {'best':>8}  {'work s':>7}  created")
    for row in rows:
        done = f"{row['evaluated']}/{row['budget'] if row['budget'] is not None else '?'}"
        print(f"{row['run_id']:>5}  {row['task'][:16]:<16} {row['status']:<12} {done:>9}  "
              f"{format_speedup(row['best_speedup']):>8}  {row['worker_s']:>7.0f}  {row['created_at'][:16].replace('T', ' ')}")
    return 0


def run_show(args: argparse.Namespace) -> int:
    if args.source and args.json:
        raise UsageError("Give either --source (the best kernel's code) or --json (the whole report), not both.")
    store = open_store(args.db)
    try:
        report = run_report(store, args.run_id)
    except StoreError as exc:
        raise UsageError(str(exc)) from None
    finally:
        store.close()
    if args.source:
        if report.winner is None:
            raise UsageError(f"Run {args.run_id} has no correct candidate yet, so there is no best source to print.")
        print(report.winner.candidate.source, end="")
    elif args.json:
        print(json.dumps(report.to_json()))
    else:
        print(report.text())
    return 0
