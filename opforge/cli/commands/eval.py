"""`opforge eval TASK.py CANDIDATE.py`: one verdict from the trusted evaluator."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from evaluator.candidate import CandidateFileError, load_candidate
from evaluator.driver.cold import evaluate_cold
from evaluator.config import EvalConfig
from evaluator.result import EvalResult
from evaluator.task import TaskError, load_task
from evaluator.task_settings import CLI_HELP as SETTINGS_HELP, apply_settings
from opforge.errors import UsageError
from opforge.display import format_bytes, format_ms, format_speedup


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("eval", help="verify and time one candidate kernel against a task",
                       description="Verify and time CANDIDATE.py (a file defining ModelNew) against TASK.py (a "
                                   "KernelBench-format file defining Model, get_inputs, get_init_inputs). The "
                                   "candidate runs in a sandbox; a cheat is refused with its reason. Exit status 0 "
                                   "whenever a verdict was produced, 2 when a file is missing or the task is unusable.")
    p.add_argument("task", help="the task file (reference Model)")
    p.add_argument("candidate", help="the candidate file (ModelNew)")
    p.add_argument("--set", dest="task_settings", action="append", default=[], metavar="NAME=VALUE",
                   help=SETTINGS_HELP)
    p.add_argument("--json", action="store_true", help="print exactly one JSON object on stdout")
    p.add_argument("--timeout", type=float, default=None, metavar="SECONDS",
                   help="hard limit for each phase (compile, each correctness trial, each timing block); "
                        "default 180 s for compiling, 120 s for the rest")
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto",
                   help="where to run (default: cuda when available; on cpu Triton runs interpreted)")
    p.add_argument("--allow-torch", action="store_true",
                   help="admit candidates that launch no custom kernel (the 'anything goes' track)")
    p.add_argument("--kernels-only", action="store_true",
                   help="the strict rule: no PyTorch compute beside the kernels, not even a final sum of their "
                        "output (default: PyTorch may compute at most half of what the reference reads)")
    p.add_argument("--timing-s", type=float, default=2.0, metavar="SECONDS",
                   help="time cap for each side's timed repetitions (default 2)")
    p.add_argument("--compile-baseline", action="store_true",
                   help="also time torch.compile(Model) as a second baseline (compile time not counted)")
    p.add_argument("--sandbox", choices=("auto", "bwrap", "process"), default="auto",
                   help="isolation for the candidate: bubblewrap when available (auto), or process-level only")
    p.set_defaults(run=run, exit_at_once=True, drives_evaluations=True)  # the workers and zygotes are closed before the verdict is printed


def require_device(device: str) -> None:
    """--device cuda on a machine without CUDA: one sentence here, not a traceback (or a blamed task) later."""
    if device == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise UsageError("--device cuda was given but there is no CUDA device here (PyTorch sees none); use "
                             "--device cpu or auto.")


def require_file(path: str, what: str) -> None:
    """A folder where a file is expected, said as such (a missing file is the loader's to report)."""
    if Path(path).expanduser().is_dir():
        raise UsageError(f"{path} is a directory, not a file; give the {what} file.")


def config_from(args: argparse.Namespace) -> EvalConfig:
    if not args.timing_s > 0:
        raise UsageError(f"--timing-s must be a positive number of seconds, not {args.timing_s}.")
    cfg = {"device": args.device, "allow_torch": args.allow_torch, "max_timing_s": args.timing_s,
           "kernels_only": args.kernels_only,
           "sandbox": args.sandbox,
           "compile_baseline": args.compile_baseline}
    if args.timeout is not None:
        if not args.timeout > 0:
            raise UsageError("--timeout must be a positive number of seconds.")
        cfg.update(compile_timeout_s=args.timeout, run_timeout_s=args.timeout)
    return EvalConfig(**cfg)


def run(args: argparse.Namespace) -> int:
    config = config_from(args)
    require_file(args.task, "task")
    require_file(args.candidate, "candidate")
    try:
        task = apply_settings(load_task(args.task), args.task_settings)
        candidate = load_candidate(args.candidate)
    except (TaskError, CandidateFileError) as exc:
        raise UsageError(str(exc)) from None
    try:
        result = evaluate_cold(task, candidate, config, while_starting=lambda: require_device(args.device))
    except TaskError as exc:
        raise UsageError(str(exc)) from None
    if args.json:
        print(json.dumps(result.to_json()))
    else:
        print(summary(result, Path(args.candidate).name, task.name))
    return 0


RELATIVE_NOTE_ABOVE = 1e-2  # above every dtype's rtol (evaluator/correctness.py): a passing figure this high needs a word


def summary(r: EvalResult, candidate_name: str, task_name: str) -> str:
    device = r.device_label  # "(Triton interpreter)" only where Triton kernels ran
    lines = [f"{r.status.value.upper():<14} {candidate_name} on task {task_name} ({device})",
             f"  reason         {r.reason}"]
    if r.backend is not None:
        lines.append(f"  backend        {r.backend}")
    if r.speedup is not None and r.candidate_ms and r.reference_ms:
        flag = "  (suspicious: re-measured)" if r.suspicious else ""
        lines.append(f"  speedup        {format_speedup(r.speedup)}{flag}")
        lines.append(f"  candidate      {format_ms(r.candidate_ms)}")
        lines.append(f"  reference      {format_ms(r.reference_ms)}")
        if r.compiled_reference_ms is not None:
            lines.append(f"  torch.compile  {format_ms(r.compiled_reference_ms)}   "
                         f"speedup over it {format_speedup(r.speedup_vs_compile)}")
    if r.max_abs_error is not None:
        rel = r.max_rel_error or 0.0
        # A pass means every element is within atol + rtol * |reference|: a relative error above that rtol can only
        # sit where the reference is near zero and the absolute tolerance covers it. Say so beside the figure.
        within = ("   (within tolerance: large only where the reference is near zero, which atol covers)"
                  if r.ok and rel > RELATIVE_NOTE_ABOVE else "")
        lines.append(f"  max abs error  {r.max_abs_error:.3g}   max rel error {rel:.3g}{within}")
    if r.peak_memory_bytes is not None:
        lines.append(f"  peak memory    {format_bytes(r.peak_memory_bytes)}")
    if r.energy_j is not None:
        lines.append(f"  energy         {r.energy_j * 1e3:.3f} mJ per call")
    if r.status.value in ("compile_error", "runtime_error", "crashed") and r.log.strip():
        tail = "\n".join("    " + line for line in r.log.strip().splitlines()[-15:])
        lines.append(f"  log (tail):\n{tail}")
    return "\n".join(lines)
