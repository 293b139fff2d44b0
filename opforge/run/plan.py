"""A new run planned from its request (task, seed kernel, configuration, budget), checked before anything is
written: what `optimize`, `submit` and the web form share."""

from __future__ import annotations

import ast
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from benchmarks import builtin_task, list_suites, seed_path
from benchmarks.suite import SEED_SUFFIXES
from evaluator.source_ast import parse_source
from evaluator.task_settings import apply_settings
from evaluator import Candidate, CandidateFileError, Task, TaskError, load_candidate, load_task
from opforge.errors import UsageError
from opforge.run.capability import job_requirement
from opforge.run.config import LLM_BACKENDS, RunConfig, resolve_backend
from opforge.run.proposers import llm_settings, resolve_coder
from opforge.run.request import CLI_NAMES, RunRequest, check_request, eval_config
from opforge.run.start import Budget, start_run
from opforge.run.shapes import Check, with_derived_shapes
from store import JobRecord, RunStatus, Store

DEFAULT_BUDGET = 20
DEFAULT_TIMING_S = 1.0


@dataclass(frozen=True, slots=True)
class RunPlan:
    task: Task
    seed: Candidate | None
    config: RunConfig
    budget: Budget
    use_archive: bool = True
    note: str = ""          # one sentence the asker should read (e.g. Triton's interpreter on a CPU)


def cuda_present() -> bool:
    import torch

    return bool(torch.cuda.is_available())


def plan_run(request: RunRequest, names: Mapping[str, str] = CLI_NAMES, cuda_available: bool | None = None,
             shape_check: Check | None = None) -> RunPlan:
    """The run that `request` describes; raises UsageError (one sentence, fields named as `names` call them) for
    anything wrong, before any write. A task without SHAPES gets the variants derived from its sizes that its
    reference runs (`shapes.py`; `shape_check`: the check, the default evaluator's on the meta device)."""
    check_request(request, names)
    name = {**CLI_NAMES, **names}.__getitem__
    task = resolve_task(request.task, request.task_settings)
    coder = resolve_coder(request.coder, request.llm.model)
    cuda = cuda_present() if cuda_available is None else cuda_available
    llm = llm_settings(request.llm, names) if coder == "llm" else None
    backend = choose_backend(request, task, cuda, coder, names)
    seed = resolve_seed(request.seed_kernel, task, backend, required=coder != "llm",
                        from_scratch=bool(llm and llm.from_scratch), names=names)
    eval_cfg = eval_config(request.timing_s, request.eval_timeout_s, DEFAULT_TIMING_S)
    config = RunConfig(coder=coder, backend=backend, eval=eval_cfg, islands=request.islands, seed=request.seed,
                       llm=llm)
    if request.confirm is not None:
        config = replace(config, confirm_repeats=request.confirm)
    budget = Budget(request.budget or DEFAULT_BUDGET, request.time_limit_s, request.worker_s,
                    request.llm.max_usd, request.llm.max_tokens)
    shaped = with_derived_shapes(task, shape_check)  # last: it starts a reference worker, once all else is checked
    note = " ".join(n for n in (backend_note(backend, cuda), shaped.note and f"{shaped.note}.") if n)
    return RunPlan(shaped.task, seed, config, budget, request.use_archive, note=note)


def choose_backend(request: RunRequest, task: Task, cuda: bool, coder: str,
                   names: Mapping[str, str] = CLI_NAMES) -> str:
    """The backend asked for; `auto` follows the starting kernel where one is given (its source says what it is
    written in), else the machine: Triton where a CUDA device is present, native CPU kernels (`cpp`) elsewhere. A
    built-in task that has no native seed kernel yet keeps its Triton one on a CPU (interpreted) for the tuner."""
    name = {**CLI_NAMES, **names}.__getitem__
    try:
        backend = resolve_backend(request.backend, cuda)
    except ValueError as exc:
        raise UsageError(f"{name('backend')}: {exc}.") from None
    if request.backend == "auto":
        backend = _auto_backend(request, task, backend, coder)
    if coder == "llm" and backend not in LLM_BACKENDS:
        if request.backend == "auto":
            return "triton"
        raise UsageError(f"The LLM coder writes {' or '.join(LLM_BACKENDS)} kernels, not {backend}; use the tuner "
                         f"({name('coder')} tune) with a native seed kernel.")
    return backend


def _auto_backend(request: RunRequest, task: Task, default: str, coder: str) -> str:
    if request.seed_kernel:
        try:
            source = Path(request.seed_kernel).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            return default  # resolve_seed says what is wrong with the file
        return kernel_backend(source) or default
    if coder != "llm" and task.path and builtin_seed(Path(task.path), default) is None:
        if builtin_seed(Path(task.path), "triton") is not None:
            return "triton"
    return default


_NATIVE = re.compile(r"\bload_c\s*\(|evaluator\.native")
_TRITON = re.compile(r"^\s*(?:import triton|from triton\b)|@triton\.jit", re.M)
_CUDA = re.compile(r"cuda_sources\s*=|__global__")


def kernel_backend(source: str) -> str | None:
    """What a kernel file is written in, read statically: cpp (evaluator.native.load_c), cuda (load_inline with CUDA
    sources), triton; None when it says nothing recognisable (a PyTorch-only candidate, say)."""
    if _NATIVE.search(source):
        return "cpp"
    if _CUDA.search(source):
        return "cuda"
    if _TRITON.search(source):
        return "triton"
    return None


def backend_note(backend: str, cuda_available: bool | None = None) -> str:
    """What a user must know about timings on this machine, or nothing."""
    cuda = cuda_present() if cuda_available is None else cuda_available
    if backend == "triton" and not cuda:
        return ("Triton on a CPU runs under its interpreter: correctness checks are real, timings and speedups are "
                "not (use --backend cpp for native CPU kernels).")
    return ""


def resolve_task(name_or_path: str, settings: Sequence[str] = ()) -> Task:
    """A task file, or a built-in task by name (`softmax`, `tiny/softmax`), with `settings` (`NAME=VALUE`) rewriting
    its top-level assignments (`evaluator.task_settings`)."""
    path = Path(name_or_path).expanduser()
    try:
        if path.exists():
            return apply_settings(load_task(path), settings)
        try:
            return apply_settings(load_task(builtin_task(name_or_path)), settings)
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


def builtin_seed(task_path: Path, backend: str) -> Path | None:
    """The built-in starting kernel for `backend` beside the task: NAME.seed.py (Triton), NAME.cpp.py (native CPU),
    NAME.cuda.py; None where there is none."""
    return seed_path(Path(task_path), backend)


def resolve_seed(seed_path: str | None, task: Task, backend: str = "triton", required: bool = True,
                 from_scratch: bool = False, names: Mapping[str, str] = CLI_NAMES) -> Candidate | None:
    """The starting kernel: the one given, else the built-in one beside the task for the backend; None where the
    LLM coder starts from scratch (asked to, or no seed kernel exists)."""
    name = {**CLI_NAMES, **names}.__getitem__
    if from_scratch and seed_path:
        raise UsageError(f"Give either {name('seed_kernel')} or {name('from_scratch')}, not both.")
    if from_scratch:
        return None
    path = Path(seed_path) if seed_path else (builtin_seed(Path(task.path), backend) if task.path else None)
    if path is None and not required:
        return None
    if path is None:
        where = (f"beside it ({task.name}{SEED_SUFFIXES[backend]})" if backend in SEED_SUFFIXES
                 else "(opforge ships none for it)")
        raise UsageError(f"{task.label} has no seed kernel for the {backend} backend {where}; give the starting kernel "
                         f"with {name('seed_kernel')}, or let the LLM coder write one (--coder llm).")
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
        tree = parse_source(source, label)
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


def queue_run(store: Store, plan: RunPlan, label: str, priority: int,
              extra: Mapping[str, Any] | None = None) -> JobRecord:
    """Record the planned run and queue a job for it (`opforge submit`, the web form and the API). The workers'
    device is not known here, so the archive prefers no device's kernels."""
    run = start_run(store, plan.task, plan.seed, plan.config, plan.budget, use_archive=plan.use_archive, device=None)
    try:
        return store.submit_job(run.id, {"task": label, "coder": plan.config.coder, "backend": plan.config.backend,
                                         **(extra or {})},
                                priority=priority, requires=job_requirement(plan.config, cuda_present()))
    except BaseException:
        store.set_run_status(run.id, RunStatus.FAILED)  # no orphan "running" run without its job
        raise
