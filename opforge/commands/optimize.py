"""`opforge optimize TASK`: evolve faster kernels for a task, evaluated in parallel and recorded in the store."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from benchmarks import builtin_task, seed_for
from evaluator import Candidate, CandidateFileError, EvalConfig, Task, TaskError, load_candidate, load_task
from evaluator.pool import LocalRunner, RayRunner, Runner
from evaluator.device import device_info, resolve_device
from opforge import archive
from opforge.cli import UsageError
from opforge.coders import add_llm_arguments, llm_config, make_proposer, resolve_coder
from opforge.display import format_speedup
from opforge.progress import ProgressPrinter
from opforge.report import member_json, run_done, run_report
from opforge.search import (Budget, RunOutcome, Search, SearchError, eval_config_from, eval_config_json,
                            start_run)
from opforge.strategy import StrategyConfig
from store import RunRecord, Store, StoreError, get_store

DEFAULT_BUDGET = 20
DEFAULT_TIMING_S = 1.0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("optimize", help="search for faster kernels for a task",
                       description="Start from a seed kernel, propose variants, verify and time each in parallel with "
                                   "the trusted evaluator, and keep every verdict in the store (so a run can be "
                                   "resumed after a crash with --resume). Progress goes to stderr.")
    p.add_argument("task", nargs="?", help="a task file, or a built-in task name such as softmax")
    p.add_argument("--resume", type=int, metavar="RUN_ID", help="continue an earlier run to its budget")
    p.add_argument("--budget", type=int, default=None, metavar="N",
                   help=f"candidates to evaluate, the seed included (default {DEFAULT_BUDGET})")
    p.add_argument("--coder", choices=("auto", "tune", "llm"), default="auto",
                   help="who proposes kernels: tune (the offline parameter tuner, no LLM), llm (coder and judge "
                        "agents over an OpenAI-compatible model, with the tuner between their calls), or auto "
                        "(default: llm when a model is configured, else tune)")
    p.add_argument("--seed-kernel", metavar="FILE", help="the starting kernel (default: the built-in task's seed)")
    p.add_argument("--db", metavar="URL", help="the store (default $OPFORGE_DB, else ./opforge.db)")
    p.add_argument("--runner", choices=("ray", "local"), default="ray",
                   help="evaluate on Ray actors (default) or on threads of this process")
    p.add_argument("--workers", type=int, default=2, metavar="N",
                   help="parallel evaluations where there is no GPU (default 2); with GPUs, one per GPU")
    p.add_argument("--ray-address", metavar="ADDR", help="an existing Ray cluster (default $RAY_ADDRESS, else local)")
    p.add_argument("--timing-s", type=float, default=None, metavar="S",
                   help=f"time cap for each side's timed repetitions (default {DEFAULT_TIMING_S:g})")
    p.add_argument("--time-limit-s", type=float, default=None, metavar="S",
                   help="stop after this much wall time (for this invocation; --resume gets it again)")
    p.add_argument("--gpu-s", type=float, default=None, metavar="S",
                   help="stop after this much evaluation time (GPU-seconds; worker-seconds on CPU)")
    p.add_argument("--islands", type=int, default=2, metavar="N", help="islands of the population (default 2)")
    p.add_argument("--seed", type=int, default=0, help="random seed of the search (default 0)")
    p.add_argument("--no-archive", action="store_true",
                   help="do not start from earlier runs' kernels of this task nor show the coder those of related "
                        "tasks (by default the store's archive is offered)")
    p.add_argument("--json", action="store_true", help="end stdout with one JSON object: run_id, evaluated, best")
    add_llm_arguments(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    _check_numbers(args)
    if args.resume is not None and args.task:
        raise UsageError("Give either a TASK to start a run or --resume RUN_ID, not both.")
    if args.resume is None and not args.task:
        raise UsageError("Name a task (a task file or a built-in name such as softmax), or give --resume RUN_ID.")
    store = _open_store(args.db)
    runner: Runner | None = None
    try:
        if args.resume is not None:
            run_record, task = _resume(store, args)
            done = run_done(store, run_record.id)
            limit = Budget.from_json(run_record.budget).max_candidates
            if done >= limit:  # nothing left to do: no workers to start
                outcome = RunOutcome(run_record.id, run_record.status, done,
                                     f"run {run_record.id} had already reached its budget of {limit} candidates", None)
                _print_summary(store, outcome, args)
                return 0
            runner = make_runner(args.runner, args.workers, args.ray_address)
        else:
            task = resolve_task(args.task)
            coder = resolve_coder(args)
            llm = llm_config(args) if coder == "llm" else None
            seed = resolve_seed(args.seed_kernel, task, required=coder != "llm",
                                from_scratch=bool(llm and llm["from_scratch"]))
            cfg = EvalConfig(max_timing_s=args.timing_s or DEFAULT_TIMING_S)
            config = {"coder": coder, "eval": eval_config_json(cfg), "islands": args.islands, "seed": args.seed}
            if llm is not None:
                config["llm"] = llm
            budget = Budget(args.budget or DEFAULT_BUDGET, args.time_limit_s, args.gpu_s, args.max_usd,
                            args.max_tokens)
            runner = make_runner(args.runner, args.workers, args.ray_address)  # before any write: no orphan runs
            run_record = start_run(store, task, seed, config, budget, use_archive=not args.no_archive,
                                   device=local_device_name(cfg.device))
        outcome = _search(store, run_record, task, runner, args)
        _print_summary(store, outcome, args)
        return 0
    except (StoreError, SearchError, TaskError) as exc:
        raise UsageError(str(exc)) from None
    finally:
        if runner is not None:
            runner.close()
        store.close()


def _check_numbers(args: argparse.Namespace) -> None:
    for flag, value in (("--budget", args.budget), ("--workers", args.workers), ("--islands", args.islands)):
        if value is not None and value < 1:
            raise UsageError(f"{flag} must be a positive whole number, not {value}.")
    for flag, value in (("--timing-s", args.timing_s), ("--time-limit-s", args.time_limit_s),
                        ("--gpu-s", args.gpu_s)):
        if value is not None and not value > 0:
            raise UsageError(f"{flag} must be a positive number of seconds, not {value}.")


def _open_store(url: str | None) -> Store:
    try:
        return get_store(url)
    except StoreError as exc:
        raise UsageError(str(exc)) from None


def resolve_task(name_or_path: str) -> Task:
    """A task file, or a built-in task by name (`softmax`, `tiny/softmax`)."""
    path = Path(name_or_path).expanduser()
    try:
        if path.exists():
            return load_task(path)
        if path.suffix == ".py" and ("/" in name_or_path or path.parent != Path(".")):
            raise UsageError(f"{name_or_path}: no such task file.")
        try:
            return load_task(builtin_task(name_or_path))
        except ValueError as exc:
            raise UsageError(f"{str(exc).rstrip('.')}, or give the path of a task file.") from None
    except TaskError as exc:
        raise UsageError(str(exc)) from None


def resolve_seed(seed_path: str | None, task: Task, required: bool = True, from_scratch: bool = False
                 ) -> Candidate | None:
    """The starting kernel: --seed-kernel, else the one beside the task; None where the LLM coder starts from
    scratch (asked to, or no seed exists)."""
    if from_scratch and seed_path:
        raise UsageError("Give either --seed-kernel FILE or --from-scratch, not both.")
    if from_scratch:
        return None
    path = Path(seed_path) if seed_path else (seed_for(task.path) if task.path else None)
    if path is None and not required:
        return None
    if path is None:
        raise UsageError(f"{task.label} has no seed kernel beside it ({task.name}.seed.py); give the starting kernel "
                         "with --seed-kernel FILE.")
    try:
        return load_candidate(path, origin="seed")
    except CandidateFileError as exc:
        raise UsageError(str(exc)) from None


def _resume(store: Store, args: argparse.Namespace) -> tuple[RunRecord, Task]:
    fixed = (args.task, args.seed_kernel, args.budget is not None, args.timing_s is not None, args.model,
             args.judge_model, args.backend, args.max_usd is not None, args.max_tokens is not None, args.prices,
             args.no_judge, args.no_review, args.from_scratch, args.tune_per_request is not None, args.coder != "auto",
             args.llm_concurrency is not None, args.llm_timeout_s is not None, args.no_archive)
    if any(fixed):
        raise UsageError("--resume continues a run as it was configured; leave out TASK, --coder, --seed-kernel, "
                         "--budget, --timing-s and the LLM settings (only --llm-base-url, --time-limit-s, --gpu-s, "
                         "--workers and --runner may change).")
    run_record = store.get_run(args.resume)
    task = store.get_task(run_record.task_id).task
    return run_record, task


def _search(store: Store, run_record: RunRecord, task: Task, runner: Runner, args: argparse.Namespace
            ) -> RunOutcome:
    config: dict[str, Any] = dict(run_record.config)
    budget = Budget.from_json(run_record.budget)
    if args.resume is not None:  # this invocation's own limits
        budget = Budget(budget.max_candidates, args.time_limit_s or budget.time_limit_s, args.gpu_s or budget.gpu_s,
                        budget.usd, budget.tokens)
    seed = int(config.get("seed", 0))
    proposing = make_proposer(store, run_record, llm_base_url=args.llm_base_url)
    strategy = StrategyConfig(n_islands=int(config.get("islands", 2)), seed=seed + run_record.evaluated)
    printer = ProgressPrinter()
    try:
        search = Search(store, run_record.id, task, proposing.proposer, runner, eval_config_from(config.get("eval")),
                        budget, strategy, oversample=proposing.oversample, on_progress=printer,
                        spend=proposing.spend, extra_per_request=proposing.extra_per_request,
                        archive_inspirations=archive.inspirations_of(store, config.get("archive")))
        return search.run()
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
    lines = [f"run {outcome.run_id} on {report.task_name}: {outcome.done} evaluated, {outcome.status.value} "
             f"({outcome.stop_reason})"]
    if best is None:
        lines.append("no correct candidate was found")
    else:
        lines.append(f"best: candidate #{best.candidate_id}, speedup {format_speedup(best.speedup)} over PyTorch, "
                     f"generation {best.generation}, {best.candidate.note or best.candidate.origin}")
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
