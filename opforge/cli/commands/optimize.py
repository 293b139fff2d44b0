"""`opforge optimize TASK`: evolve faster kernels for a task, evaluated in parallel and recorded in the store."""

from __future__ import annotations

import argparse
import json
import shlex
import sys

from evaluator import Task, TaskError
from evaluator.device.info import device_info, resolve_device
from evaluator.driver.pool import LocalRunner, Runner
from evaluator.driver.ray_runner import RayRunner
from opforge.cli.flags import RAY_ADDRESS_HELP, add_run_arguments, open_store, run_request
from opforge.display import format_speedup
from opforge.errors import UsageError
from opforge.reports.run_summary import member_json, run_done, run_report
from opforge.run.config import RunConfigError
from opforge.run.confirm import confirmation_owed
from opforge.run.launch import confirm_policy, run_config, search_for_run
from opforge.run.plan import backend_note, plan_run
from opforge.run.progress import ProgressPrinter
from opforge.run.request import positive_whole
from opforge.run.search import RunOutcome, SearchError
from opforge.run.start import Budget, start_run
from store import RunRecord, RunStatus, Store, StoreError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("optimize", help="search for faster kernels for a task",
                       description="Start from a seed kernel, propose variants, verify and time each in parallel with "
                                   "the trusted evaluator, and keep every verdict in the store (so a run can be "
                                   "resumed after a crash with --resume). Progress goes to stderr.")
    p.add_argument("task", nargs="?", help="a task file, or a built-in task name such as softmax")
    p.add_argument("--resume", type=int, metavar="RUN_ID", help="continue an earlier run to its budget")
    p.add_argument("--runner", choices=("ray", "local"), default="ray",
                   help="evaluate on Ray actors (default) or on threads of this process")
    p.add_argument("--workers", type=int, default=2, metavar="N",
                   help="parallel evaluations where there is no GPU (default 2); with GPUs, one per GPU")
    p.add_argument("--ray-address", metavar="ADDR", help=RAY_ADDRESS_HELP)
    p.add_argument("--json", action="store_true", help="end stdout with one JSON object: run_id, evaluated, best")
    add_run_arguments(p, "stop after this much wall time (for this invocation; --resume gets it again)")
    p.set_defaults(run=run, drives_evaluations=True)


def run(args: argparse.Namespace) -> int:
    positive_whole(args.workers, "--workers")
    if args.resume is not None and args.task:
        raise UsageError("Give either a TASK to start a run or --resume RUN_ID, not both.")
    if args.resume is None and not args.task:
        raise UsageError("Name a task (a task file or a built-in name such as softmax), or give --resume RUN_ID.")
    request = run_request(args) if args.resume is None else None
    plan = plan_run(request) if request is not None else None  # everything checked before the store is opened
    store = open_store(args.db)
    runner: Runner | None = None
    run_record: RunRecord | None = None
    try:
        if args.resume is not None:
            run_record, task = _resume(store, args)
            done = run_done(store, run_record.id)
            limit = Budget.from_json(run_record.budget).max_candidates
            if done < limit:
                print(f"opforge: resuming run {run_record.id} on {task.name}: {done} of {limit} candidates evaluated",
                      file=sys.stderr, flush=True)
            owed = confirmation_owed(store, run_record.id, confirm_policy(run_config(run_record)))
            if done >= limit and not owed:  # no workers to start
                outcome = RunOutcome(run_record.id, run_record.status, done,
                                     f"run {run_record.id} had already reached its budget of {limit} candidates", None)
                _print_summary(store, outcome, args)
                return 0
            runner = make_runner(args.runner, args.workers, args.ray_address)
        else:
            assert plan is not None
            task = plan.task
            runner = make_runner(args.runner, args.workers, args.ray_address)  # before any write: no orphan runs
            run_record = start_run(store, task, plan.seed, plan.config, plan.budget, use_archive=plan.use_archive,
                                   device=local_device_name(plan.config.eval.device))
        outcome = _search(store, run_record, task, runner, args, note=plan.note if plan else "")
        _print_summary(store, outcome, args)
        if outcome.status == RunStatus.FAILED:  # e.g. the LLM endpoint does not answer: the summary says why
            print(f"opforge: run {outcome.run_id} failed: {outcome.stop_reason}.", file=sys.stderr)
            return 1
        return 0
    except (StoreError, SearchError, TaskError, RunConfigError) as exc:
        raise UsageError(str(exc)) from None
    except KeyboardInterrupt:
        if run_record is None:
            raise
        raise KeyboardInterrupt(resume_hint(run_record.id, args.db)) from None
    finally:
        if runner is not None:
            runner.close()
        store.close()


def resume_hint(run_id: int, db: str | None) -> str:
    """What an interrupted run's user reads after `opforge: interrupted; `."""
    again = ["opforge", "optimize", "--resume", str(run_id)] + (["--db", db] if db else [])
    return f"run {run_id} is kept: continue it with {shlex.join(again)}"


def _resume(store: Store, args: argparse.Namespace) -> tuple[RunRecord, Task]:
    fixed = (args.task, args.seed_kernel, args.budget is not None, args.timing_s is not None,
             args.eval_timeout_s is not None, args.model,
             args.judge_model, args.backend != "auto", args.max_usd is not None, args.max_tokens is not None, args.prices,
             args.no_judge, args.no_review, args.from_scratch, args.tune_per_request is not None, args.coder != "auto",
             args.llm_concurrency is not None, args.llm_timeout_s is not None, args.llm_retries is not None, args.no_archive, args.task_settings)
    if any(fixed):
        raise UsageError("--resume continues a run as it was configured; leave out TASK, --set, --coder, "
                         "--seed-kernel, --backend, --budget, --timing-s, --timeout and the LLM settings (only --llm-base-url, "
                         "--time-limit-s, --worker-s, --workers and --runner may change).")
    run_record = store.get_run(args.resume)
    task = store.get_task(run_record.task_id).task
    return run_record, task


def _search(store: Store, run_record: RunRecord, task: Task, runner: Runner, args: argparse.Namespace,
            note: str = "") -> RunOutcome:
    budget = Budget.from_json(run_record.budget)
    if args.resume is not None:  # this invocation's own limits
        budget = Budget(budget.max_candidates, args.time_limit_s or budget.time_limit_s,
                        args.worker_s or budget.worker_s, budget.usd, budget.tokens)
        note = note or backend_note(run_config(run_record).backend)
    printer = ProgressPrinter(note=note)
    try:
        return search_for_run(store, run_record, task, runner, budget=budget, llm_base_url=args.llm_base_url,
                              on_progress=printer).run()
    finally:
        printer.finish()


def local_device_name(device: str) -> str:
    """The name of the device this machine evaluates on (the archive prefers kernels measured on it)."""
    return device_info(resolve_device(device)).name


def make_runner(kind: str, workers: int, ray_address: str | None) -> Runner:
    if kind == "local":
        return LocalRunner(workers)
    try:
        return RayRunner(workers=workers, address=ray_address)
    except Exception as exc:  # noqa: BLE001 - Ray raises many kinds; the user needs one sentence
        where = f"the Ray cluster at {ray_address}" if ray_address else "Ray"
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else exc.__class__.__name__
        raise UsageError(f"Cannot start evaluation workers on {where}: {first} (use --runner local to evaluate "
                         "without Ray).") from None


def _print_summary(store: Store, outcome: RunOutcome, args: argparse.Namespace) -> None:
    report = run_report(store, outcome.run_id)
    best = report.winner
    lines = [f"run {outcome.run_id} on {report.task_label}: {outcome.done} evaluated, {outcome.status.value} "
             f"({outcome.stop_reason})"]
    if best is None:
        lines.append("no correct candidate was found")
    else:
        lines.append(f"best: candidate #{best.candidate_id}, speedup {format_speedup(best.speedup)} over PyTorch, "
                     f"generation {best.generation}, {best.candidate.note or best.candidate.origin}")
        if report.confirmation_text(best):
            lines.append(f"  {report.confirmation_text(best)}")
    if report.cost.usage:
        lines.append(report.cost.text()[0])
    db = f" --db {args.db}" if args.db else ""
    lines.append(f"details: opforge show {outcome.run_id}{db}")
    print("\n".join(lines))
    if args.json:
        print(json.dumps({"run_id": outcome.run_id, "evaluated": outcome.done, "status": outcome.status.value,
                          "stop_reason": outcome.stop_reason,
                          "best": None if best is None else {k: member_json(best)[k]
                                                             for k in ("candidate_id", "speedup", "status")}}))
