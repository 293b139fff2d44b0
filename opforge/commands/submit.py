"""`opforge submit TASK`: queue a task for optimisation by `opforge worker`s; prints the job's id.

A job is a run waiting for a worker: submit records the task, creates the run with its seed kernel, configuration and
budget exactly as `opforge optimize` would, and queues a job for it. A worker claims the job and drives the run like
`opforge optimize --resume RUN_ID` (docs/QUEUE.md).
"""

from __future__ import annotations

import argparse
import json
import sys

from evaluator import EvalConfig, TaskError
from opforge.cli import UsageError
from opforge.coders import add_llm_arguments, llm_config, resolve_coder
from opforge.commands.optimize import DEFAULT_BUDGET, DEFAULT_TIMING_S, resolve_seed, resolve_task
from opforge.search import Budget, SearchError, eval_config_json, start_run
from store import RunStatus, StoreError, get_store


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("submit", help="queue a task for optimisation by workers; prints the job's id",
                       description="Record a task and a new run (seed kernel, configuration and budget, as `opforge "
                                   "optimize` would) and queue a job for it; `opforge worker` processes on any "
                                   "machine sharing the store claim and run it. Prints the job's id on stdout.")
    p.add_argument("task", help="a task file, or a built-in task name such as softmax")
    p.add_argument("--priority", type=int, default=0, metavar="N",
                   help="higher runs first; equal priorities run oldest first (default 0)")
    p.add_argument("--budget", type=int, default=None, metavar="N",
                   help=f"candidates to evaluate, the seed included (default {DEFAULT_BUDGET})")
    p.add_argument("--coder", choices=("auto", "tune", "llm"), default="auto",
                   help="who proposes kernels: tune, llm, or auto (default: llm when a model is configured, "
                        "else tune); see `opforge optimize --help`")
    p.add_argument("--seed-kernel", metavar="FILE", help="the starting kernel (default: the built-in task's seed)")
    p.add_argument("--db", metavar="URL", help="the store (default $OPFORGE_DB, else ./opforge.db)")
    p.add_argument("--timing-s", type=float, default=None, metavar="S",
                   help=f"time cap for each side's timed repetitions (default {DEFAULT_TIMING_S:g})")
    p.add_argument("--time-limit-s", type=float, default=None, metavar="S",
                   help="stop after this much wall time (per worker that drives the job)")
    p.add_argument("--gpu-s", type=float, default=None, metavar="S",
                   help="stop after this much evaluation time (GPU-seconds; worker-seconds on CPU)")
    p.add_argument("--islands", type=int, default=2, metavar="N", help="islands of the population (default 2)")
    p.add_argument("--seed", type=int, default=0, help="random seed of the search (default 0)")
    p.add_argument("--no-archive", action="store_true",
                   help="do not start from earlier runs' kernels of this task nor show the coder those of related "
                        "tasks (by default the store's archive is offered)")
    p.add_argument("--json", action="store_true", help='print one JSON object instead: {"job_id": ..., "run_id": ...}')
    add_llm_arguments(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    for flag, value in (("--budget", args.budget), ("--islands", args.islands)):
        if value is not None and value < 1:
            raise UsageError(f"{flag} must be a positive whole number, not {value}.")
    for flag, value in (("--timing-s", args.timing_s), ("--time-limit-s", args.time_limit_s),
                        ("--gpu-s", args.gpu_s)):
        if value is not None and not value > 0:
            raise UsageError(f"{flag} must be a positive number of seconds, not {value}.")
    # The run's configuration, built as `opforge optimize` builds it (opforge/commands/optimize.py).
    task = resolve_task(args.task)
    coder = resolve_coder(args)
    llm = llm_config(args) if coder == "llm" else None
    seed = resolve_seed(args.seed_kernel, task, required=coder != "llm", from_scratch=bool(llm and llm["from_scratch"]))
    cfg = EvalConfig(max_timing_s=args.timing_s or DEFAULT_TIMING_S)
    config = {"coder": coder, "eval": eval_config_json(cfg), "islands": args.islands, "seed": args.seed}
    if llm is not None:
        config["llm"] = llm
    budget = Budget(args.budget or DEFAULT_BUDGET, args.time_limit_s, args.gpu_s, args.max_usd, args.max_tokens)
    try:
        store = get_store(args.db)
    except StoreError as exc:
        raise UsageError(str(exc)) from None
    try:
        # The workers' device is not known here: the archive prefers no device's kernels.
        run_record = start_run(store, task, seed, config, budget, use_archive=not args.no_archive, device=None)
        try:
            job = store.submit_job(run_record.id, {"task": args.task, "coder": coder}, priority=args.priority)
        except BaseException:
            store.set_run_status(run_record.id, RunStatus.FAILED)  # no orphan "running" run without its job
            raise
    except (StoreError, SearchError, TaskError) as exc:
        raise UsageError(str(exc)) from None
    finally:
        store.close()
    if args.json:
        print(json.dumps({"job_id": job.id, "run_id": job.run_id, "task": task.name, "state": job.state.value,
                          "priority": job.priority, "budget": budget.max_candidates}))
    else:
        print(job.id)
    db = f" --db {args.db}" if args.db else ""
    print(f"opforge: job {job.id} queued: {task.name}, run {job.run_id}, budget {budget.max_candidates} candidates, "
          f"priority {job.priority}; start workers with: opforge worker{db}", file=sys.stderr)
    return 0
