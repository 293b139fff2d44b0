"""`opforge bench --suite NAME|PATH`: optimise every task of a suite with one agent configuration (a leaderboard
entry); `--resume BENCH_ID` continues one."""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

from benchmarks import list_suites
from opforge.cli.commands.optimize import local_device_name, make_runner
from opforge.cli.flags import (RAY_ADDRESS_HELP, add_backend_argument, add_confirm_argument, add_db_argument,
                               add_llm_arguments, add_timeout_argument, llm_request, open_store)
from opforge.display import format_speedup
from opforge.errors import UsageError
from opforge.run.bench import agent_label, bench_backend, bench_tasks, run_bench
from opforge.run.bench_config import BenchConfig
from opforge.run.config import RunConfig
from opforge.run.plan import DEFAULT_TIMING_S, cuda_present
from opforge.run.proposers import llm_settings, resolve_coder
from opforge.run.request import RunRequest, check_request, eval_config, positive_whole
from store import StoreError

DEFAULT_BUDGET_PER_TASK = 10


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bench", help="run an agent over a suite of tasks (a leaderboard entry)",
                       description="Optimise every task of a suite with one agent configuration, tasks in parallel "
                                   "on the evaluation pool. Each task is an ordinary run in the store; the bench "
                                   "resumes with --resume BENCH_ID. See the results with `opforge leaderboard`.")
    p.add_argument("--suite", help="a built-in suite (tiny, ...), a folder of task files, or a KernelBench checkout "
                                   "(its level1/ level2/ level3/ folders)")
    p.add_argument("--resume", type=int, metavar="BENCH_ID", help="continue an earlier bench")
    p.add_argument("--tasks", metavar="PATTERN", help="only tasks whose label or name matches (soft*, level1/*)")
    p.add_argument("--coder", choices=("auto", "tune", "llm"), default="auto",
                   help="the agent: tune (offline tuner), llm (coder and judge agents) or auto (llm when a model is "
                        "configured)")
    p.add_argument("--budget-per-task", type=int, default=None, metavar="N",
                   help=f"candidates evaluated per task, the seed included (default {DEFAULT_BUDGET_PER_TASK})")
    p.add_argument("--parallel-tasks", type=int, default=None, metavar="K",
                   help="tasks optimised at once (default: the pool's capacity)")
    add_backend_argument(p)
    add_db_argument(p)
    p.add_argument("--runner", choices=("ray", "local"), default="ray", help="Ray actors (default) or threads")
    p.add_argument("--workers", type=int, default=2, metavar="N", help="parallel evaluations without a GPU (default 2)")
    p.add_argument("--ray-address", metavar="ADDR", help=RAY_ADDRESS_HELP)
    p.add_argument("--timing-s", type=float, default=None, metavar="S",
                   help=f"time cap for each side's timed repetitions (default {DEFAULT_TIMING_S:g})")
    add_timeout_argument(p)
    p.add_argument("--seed", type=int, default=0, help="random seed of the searches (default 0)")
    p.add_argument("--no-archive", action="store_true",
                   help="forbid the store's archive of earlier kernels, so the agent's score is its own (the "
                        "leaderboard marks benches that used it with +archive)")
    p.add_argument("--kernels-only", action="store_true",
                   help="judge kernels by the strict rule: no PyTorch compute beside them, not even a final sum "
                        "(the leaderboard shows each bench's rule)")
    add_confirm_argument(p, "each task's search", time_limit=False)
    p.add_argument("--json", action="store_true", help="end stdout with one JSON object describing the bench")
    add_llm_arguments(p)
    p.set_defaults(run=run, drives_evaluations=True)


def run(args: argparse.Namespace) -> int:
    for flag, value in (("--budget-per-task", args.budget_per_task), ("--parallel-tasks", args.parallel_tasks),
                        ("--workers", args.workers)):
        positive_whole(value, flag)
    request = RunRequest(task=args.suite or "", coder=args.coder, backend=args.backend, timing_s=args.timing_s,
                         eval_timeout_s=args.eval_timeout_s, seed=args.seed, use_archive=not args.no_archive,
                         confirm=args.confirm, llm=llm_request(args))
    check_request(request)
    if args.suite is not None and args.resume is not None:
        raise UsageError("Give either --suite NAME|PATH to start a bench or --resume BENCH_ID, not both.")
    if args.suite is None and args.resume is None:
        raise UsageError("Give --suite NAME|PATH to start a bench, or --resume BENCH_ID to continue one.")
    store = open_store(args.db)
    runner = None
    try:
        if args.resume is not None:
            bench = store.get_bench(args.resume)
            n_tasks = len(bench_tasks(bench.suite, bench.config.get("tasks")))
        else:
            tasks = bench_tasks(args.suite, args.tasks)
            n_tasks = len(tasks)
            coder = resolve_coder(args.coder, args.model)
            config = BenchConfig(
                run=RunConfig(coder=coder, backend=bench_backend(args.backend, tasks, coder, cuda_present()),
                              eval=dataclasses.replace(eval_config(args.timing_s, args.eval_timeout_s, DEFAULT_TIMING_S),
                                                       kernels_only=args.kernels_only), seed=args.seed,
                              llm=llm_settings(request.llm) if coder == "llm" else None,
                              **({} if args.confirm is None else {"confirm_repeats": args.confirm})),
                budget_per_task=args.budget_per_task or DEFAULT_BUDGET_PER_TASK, tasks=args.tasks,
                max_usd=args.max_usd, max_tokens=args.max_tokens, use_archive=not args.no_archive,
                device=local_device_name("auto"))
            runner = make_runner(args.runner, args.workers, args.ray_address)
            bench = store.create_bench(_suite_key(args.suite), agent_label(config.to_json()), config.to_json())
        if runner is None:
            runner = make_runner(args.runner, args.workers, args.ray_address)
        parallel = args.parallel_tasks or min(n_tasks, runner.capacity)
        outcome = run_bench(store, bench, runner, parallel, llm_base_url=args.llm_base_url)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    except StoreError as exc:
        raise UsageError(str(exc)) from None
    finally:
        if runner is not None:
            runner.close()
        store.close()
    solved = [s for s in outcome.tasks if s.best is not None]
    print(f"bench {outcome.bench.id} ({outcome.bench.agent} on {outcome.bench.suite}): {len(solved)}/"
          f"{len(outcome.tasks)} tasks solved, {outcome.bench.status.value}")
    for s in outcome.tasks:
        print(f"  {s.label:<40} {s.status:<11} best {format_speedup(s.best):>8}  run {s.run_id or '-'}"
              f"{'  ' + s.note if s.note and s.status == 'failed' else ''}")
    db = f" --db {args.db}" if args.db else ""
    print(f"leaderboard: opforge leaderboard --suite {outcome.bench.suite}{db}")
    if args.json:
        print(json.dumps({"bench_id": outcome.bench.id, "agent": outcome.bench.agent, "suite": outcome.bench.suite,
                          "status": outcome.bench.status.value,
                          "tasks": [{"task": s.label, "run_id": s.run_id, "status": s.status, "best_speedup": s.best,
                                     "evaluated": s.done} for s in outcome.tasks]}))
    return 0


def _suite_key(suite: str) -> str:
    """A built-in suite by name; a folder by its absolute path (so benches of one folder group together)."""
    return suite if suite in list_suites() else str(Path(suite).expanduser().resolve())
