"""`opforge submit TASK`: queue a task for optimisation by `opforge worker`s; prints the job's id.

A job is a run waiting for a worker: submit records the task, creates the run with its seed kernel, configuration and
budget exactly as `opforge optimize` would, and queues a job for it. A worker claims the job and drives the run like
`opforge optimize --resume RUN_ID` (docs/QUEUE.md).
"""

from __future__ import annotations

import argparse
import json
import sys

from evaluator import TaskError
from opforge.cli.flags import add_run_arguments, open_store, run_request
from opforge.errors import UsageError
from opforge.run.plan import plan_run, queue_run
from opforge.run.search import SearchError
from store import StoreError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("submit", help="queue a task for optimisation by workers; prints the job's id",
                       description="Record a task and a new run (seed kernel, configuration and budget, as `opforge "
                                   "optimize` would) and queue a job for it; `opforge worker` processes on any "
                                   "machine sharing the store claim and run it. Prints the job's id on stdout.")
    p.add_argument("task", help="a task file, or a built-in task name such as softmax")
    p.add_argument("--priority", type=int, default=0, metavar="N",
                   help="higher runs first; equal priorities run oldest first (default 0)")
    p.add_argument("--json", action="store_true", help='print one JSON object instead: {"job_id": ..., "run_id": ...}')
    add_run_arguments(p, "stop after this much wall time (per worker that drives the job)")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    plan = plan_run(run_request(args))
    task, budget = plan.task, plan.budget
    store = open_store(args.db)
    try:
        job = queue_run(store, plan, args.task, args.priority)
    except (StoreError, SearchError, TaskError) as exc:
        raise UsageError(str(exc)) from None
    finally:
        store.close()
    if args.json:
        print(json.dumps({"job_id": job.id, "run_id": job.run_id, "task": task.name, "backend": plan.config.backend,
                          "state": job.state.value,
                          "priority": job.priority, "budget": budget.max_candidates}))
    else:
        print(job.id)
    db = f" --db {args.db}" if args.db else ""
    print(f"opforge: job {job.id} queued: {task.name} ({plan.config.backend}), run {job.run_id}, budget {budget.max_candidates} candidates, "
          f"priority {job.priority}; start workers with: opforge worker{db}", file=sys.stderr)
    return 0
