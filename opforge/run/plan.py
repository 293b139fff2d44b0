"""What `optimize` and `submit` share: the flags that describe a new run, and the run they describe (task, seed
kernel, configuration, budget), checked before anything is written."""

from __future__ import annotations

import argparse
import ast
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks import builtin_task, list_suites, seed_for
from evaluator import Candidate, CandidateFileError, EvalConfig, Task, TaskError, load_candidate, load_task
from opforge.errors import UsageError
from opforge.run.proposers import add_llm_arguments, llm_config, resolve_coder
from opforge.run.search import Budget, eval_config_json, start_run
from store import JobRecord, RunStatus, Store

DEFAULT_BUDGET = 20
DEFAULT_TIMING_S = 1.0


def add_run_arguments(p: argparse.ArgumentParser, time_limit_help: str) -> None:
    """--budget, --coder, --seed-kernel, --db, timing and limits, islands, seed, --no-archive and the LLM flags."""
    p.add_argument("--budget", type=int, default=None, metavar="N",
                   help=f"candidates to evaluate, the seed included (default {DEFAULT_BUDGET})")
    p.add_argument("--coder", choices=("auto", "tune", "llm"), default="auto",
                   help="who proposes kernels: tune (the offline parameter tuner, no LLM), llm (coder and judge "
                        "agents over an OpenAI-compatible model, with the tuner between their calls), or auto "
                        "(default: llm when a model is configured, else tune)")
    p.add_argument("--seed-kernel", metavar="FILE", help="the starting kernel (default: the built-in task's seed)")
    p.add_argument("--db", metavar="URL", help="the store (default $OPFORGE_DB, else ./opforge.db)")
    p.add_argument("--timing-s", type=float, default=None, metavar="S",
                   help=f"time cap for each side's timed repetitions (default {DEFAULT_TIMING_S:g})")
    p.add_argument("--time-limit-s", type=float, default=None, metavar="S", help=time_limit_help)
    p.add_argument("--worker-s", "--gpu-s", dest="worker_s", type=float, default=None, metavar="S",
                   help="stop after workers were busy this long in all: seconds from submitting each candidate to "
                        "its verdict (builds included), summed (--gpu-s is the old name)")
    p.add_argument("--islands", type=int, default=2, metavar="N", help="islands of the population (default 2)")
    p.add_argument("--seed", type=int, default=0, help="random seed of the search (default 0)")
    p.add_argument("--no-archive", action="store_true",
                   help="do not start from earlier runs' kernels of this task nor show the coder those of related "
                        "tasks (by default the store's archive is offered)")
    add_llm_arguments(p)


def check_run_numbers(args: argparse.Namespace) -> None:
    for flag, value in (("--budget", args.budget), ("--islands", args.islands),
                        ("--workers", getattr(args, "workers", None))):
        if value is not None and value < 1:
            raise UsageError(f"{flag} must be a positive whole number, not {value}.")
    for flag, value in (("--timing-s", args.timing_s), ("--time-limit-s", args.time_limit_s),
                        ("--worker-s", args.worker_s)):
        if value is not None and not value > 0:
            raise UsageError(f"{flag} must be a positive number of seconds, not {value}.")


@dataclass(frozen=True, slots=True)
class RunPlan:
    task: Task
    seed: Candidate | None
    config: dict[str, Any]
    budget: Budget
    eval_cfg: EvalConfig


def plan_run(args: argparse.Namespace) -> RunPlan:
    """The run that `args` describe; raises UsageError (one sentence) for anything wrong, before any write."""
    task = resolve_task(args.task)
    coder = resolve_coder(args)
    llm = llm_config(args) if coder == "llm" else None
    seed = resolve_seed(args.seed_kernel, task, required=coder != "llm",
                        from_scratch=bool(llm and llm["from_scratch"]))
    cfg = EvalConfig(max_timing_s=args.timing_s or DEFAULT_TIMING_S)
    config: dict[str, Any] = {"coder": coder, "eval": eval_config_json(cfg), "islands": args.islands,
                              "seed": args.seed}
    if llm is not None:
        config["llm"] = llm
    budget = Budget(args.budget or DEFAULT_BUDGET, args.time_limit_s, args.worker_s, args.max_usd, args.max_tokens)
    return RunPlan(task, seed, config, budget, cfg)


def resolve_task(name_or_path: str) -> Task:
    """A task file, or a built-in task by name (`softmax`, `tiny/softmax`)."""
    path = Path(name_or_path).expanduser()
    try:
        if path.exists():
            return load_task(path)
        try:
            return load_task(builtin_task(name_or_path))
        except ValueError as exc:
            if _names_a_file(name_or_path) and str(exc).startswith("There is no built-in task"):
                raise UsageError(f"{name_or_path}: no such task file.") from None
            raise UsageError(f"{str(exc).rstrip('.')}, or give the path of a task file.") from None
    except TaskError as exc:
        raise UsageError(str(exc)) from None


def _names_a_file(name: str) -> bool:
    """Whether a name that is no built-in task was meant as a path: it ends in .py, or it has a path separator that
    does not follow a suite's name (`tiny/softmx` is a mistyped built-in name; `src/t.py`, `./t`, `/x/t` are files)."""
    if name.endswith(".py"):
        return True
    seps = {"/", os.sep} | ({os.altsep} if os.altsep else set())
    if not any(sep in name for sep in seps):
        return False
    head = name.replace(os.sep, "/").split("/", 1)[0]
    return head not in (*list_suites(), "all")


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
    if Path(path).is_dir():
        raise UsageError(f"{path} is a directory, not a file; give --seed-kernel a kernel's .py file.")
    try:
        seed = load_candidate(path, origin="seed")
    except CandidateFileError as exc:
        raise UsageError(str(exc)) from None
    _check_defines_model_new(path, seed.source)
    return seed


def _check_defines_model_new(path: Path, source: str) -> None:
    problem = seed_source_problem(source, str(path))
    if problem:
        raise UsageError(problem)


def seed_source_problem(source: str, label: str) -> str | None:
    """Why a seed kernel's source cannot load at all, in one sentence naming `label`, or None: it must be Python
    with a top-level ModelNew (a class, or a name bound by assignment or import), so that a wrong file fails when it
    is given (the CLI's --seed-kernel, the web form) rather than as the run's compile_error."""
    try:
        tree = ast.parse(source, filename=label)
    except SyntaxError as exc:
        return f"{label}: syntax error on line {exc.lineno}: {exc.msg}; fix the seed kernel."
    except ValueError:  # null bytes
        return f"{label}: the seed kernel is not Python source."
    if not _binds_model_new(tree.body):
        return (f"{label}: not a kernel file: it does not define class ModelNew (a candidate defines ModelNew with "
                "Model's constructor signature).")
    return None


def _binds_model_new(body: list[ast.stmt]) -> bool:
    for node in body:
        if isinstance(node, ast.ClassDef) and node.name == "ModelNew":
            return True
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(n, ast.Name) and n.id == "ModelNew" for t in targets for n in ast.walk(t)):
                return True
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            if any((a.asname or a.name) == "ModelNew" for a in node.names):
                return True
        if isinstance(node, (ast.If, ast.Try, ast.With)):  # `if HAS_TRITON: class ModelNew ...`, try/except
            nested = [*node.body, *getattr(node, "orelse", []), *getattr(node, "finalbody", []),
                      *(s for h in getattr(node, "handlers", []) for s in h.body)]
            if _binds_model_new(nested):
                return True
    return False


def queue_run(store: Store, plan: RunPlan, label: str, priority: int, use_archive: bool,
              extra: Mapping[str, Any] | None = None) -> JobRecord:
    """Record the planned run and queue a job for it (`opforge submit`, the web form and the API). The workers'
    device is not known here, so the archive prefers no device's kernels."""
    run = start_run(store, plan.task, plan.seed, plan.config, plan.budget, use_archive=use_archive, device=None)
    try:
        return store.submit_job(run.id, {"task": label, "coder": plan.config["coder"], **(extra or {})},
                                priority=priority)
    except BaseException:
        store.set_run_status(run.id, RunStatus.FAILED)  # no orphan "running" run without its job
        raise
