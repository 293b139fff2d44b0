"""`opforge task check TASK.py|FOLDER`: load tasks, run each reference once per shape variant, show what goes in and
out, and flag degenerate tasks (outputs a constant or a stored result reproduces, inputs or weights the output ignores).

Exit status: 0 when every task is clean, 1 when a task is degenerate (usable, but a kernel could pass it without doing
the work), 2 when a task is unusable (or, for a single file, missing).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from benchmarks.kernelbench import problems
from evaluator import TaskError, TaskReport, default_evaluator, load_task
from evaluator.task_settings import CLI_HELP as SETTINGS_HELP, apply_settings
from evaluator.verify.task_check import META_NOTE
from evaluator.worker.task_size import HELD_COPIES
from opforge.errors import UsageError
from opforge.cli.commands.eval import require_device

CLEAN, DEGENERATE, UNUSABLE = 0, 1, 2


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("task", help="work with task files", description="Work with task files.")
    tsub = p.add_subparsers(dest="task_command", metavar="ACTION")
    c = tsub.add_parser("check", help="load and validate tasks, run each reference, flag degenerate tasks",
                        description="Load and validate each task in a separate process, run the reference once for "
                                    "the benchmark shape and every SHAPES variant, and print input and output shapes "
                                    "and dtypes. On a real device (the CPU by default) also check that the task is "
                                    "not degenerate: outputs not near-constant, varying with the seed, every input "
                                    "and the weights influencing them. A folder means every KernelBench problem file "
                                    "in it (a KernelBench checkout, its KernelBench/ folder or a level folder). Exit "
                                    "status 0 when all are clean, 1 when one is degenerate, 2 when one is unusable.")
    c.add_argument("task", nargs="+", help="task files or folders of them")
    c.add_argument("--json", action="store_true", help="print one JSON object per task on stdout")
    c.add_argument("--set", dest="task_settings", action="append", default=[], metavar="NAME=VALUE",
                   help=SETTINGS_HELP + " (each task checked must assign NAME)")
    c.add_argument("--meta", action="store_true",
                   help="run on PyTorch's meta device: shapes only (no degenerate-task checks), no memory or "
                        "compute, instant for huge tasks")
    c.add_argument("--device", choices=("cpu", "cuda", "auto"), default="cpu", help="where to run the reference")
    c.set_defaults(run=run_check)
    p.set_defaults(run=lambda args: (p.print_help(), 2)[1])


def run_check(args: argparse.Namespace) -> int:
    if not args.meta:
        require_device(args.device)
    paths = _expand(args.task)
    single = len(paths) == 1 and not Path(args.task[0]).is_dir()
    counts = {CLEAN: 0, DEGENERATE: 0, UNUSABLE: 0}
    for path in paths:
        try:
            task = apply_settings(load_task(path), args.task_settings)
            report = default_evaluator().check_task(task, "meta" if args.meta else args.device)
        except TaskError as exc:
            if args.json:  # a single task too: scripts read the record; the sentence still goes to stderr
                print(json.dumps({"task": path, "ok": False, "unusable": str(exc)}), flush=True)
            if single:
                raise UsageError(str(exc)) from None
            counts[UNUSABLE] += 1
            if not args.json:
                print(f"unusable  {path}\n  {exc}", flush=True)
            continue
        verdict = DEGENERATE if report.degenerate else CLEAN
        counts[verdict] += 1
        if args.json:
            print(json.dumps(_as_json(path, report)), flush=True)
        else:
            _print_report(path, report, repeat_meta_note=single)
    if not single:
        summary = (f"{counts[CLEAN]} ok, {counts[DEGENERATE]} degenerate, {counts[UNUSABLE]} unusable"
                   + (" (shapes only: the degenerate-task checks need a real device)" if args.meta else ""))
        print(summary, file=sys.stderr if args.json else sys.stdout)
    return UNUSABLE if counts[UNUSABLE] else DEGENERATE if counts[DEGENERATE] else CLEAN


def _expand(items: list[str]) -> list[str]:
    """Task files as given; a folder becomes its KernelBench problem files, by level and problem number."""
    paths: list[str] = []
    for item in items:
        if Path(item).is_dir():
            try:
                paths += [str(p.path) for p in problems(item)]
            except ValueError as exc:
                raise UsageError(str(exc)) from None
        else:
            paths.append(item)
    return paths


def _as_json(path: str, report: TaskReport) -> dict:
    return {"task": path, "ok": True, "device": report.device, "variants": list(report.variants),
            "inputs": [list(v) for v in report.inputs], "outputs": [list(v) for v in report.outputs],
            "ops": list(report.ops), "degenerate": list(report.degenerate),
            "degenerate_checked": report.degenerate_checked, "notes": list(report.notes),
            "sizes": [s.to_wire() for s in report.sizes]}


def _print_report(path: str, report: TaskReport, repeat_meta_note: bool) -> None:
    head = "degenerate" if report.degenerate else "ok"
    print(f"{head}  {path}  ({len(report.variants)} shape variant(s), on {report.device})")
    for i, (over, ins, outs) in enumerate(zip(report.variants, report.inputs, report.outputs)):
        label = "benchmark shape" if i == 0 else "variant " + ", ".join(f"{k}={v}" for k, v in over.items())
        print(f"  {label}")
        print(f"    inputs : {_shapes(ins)}")
        print(f"    outputs: {_shapes(outs)}")
    if report.ops:
        print(f"  reference ops: {', '.join(report.ops)}")
    if report.sizes:
        worst = max(report.sizes, key=lambda s: s.call_bytes)
        held = _mib(HELD_COPIES * worst.call_bytes)
        print(f"  memory: {_mib(worst.input_bytes)} of inputs and {_mib(worst.weight_bytes)} of weights a call at "
              f"the largest variant; an evaluation holds about {HELD_COPIES}x that ({held})")
    for finding in report.degenerate:
        print(f"  degenerate: {finding}")
    for note in report.notes:
        if repeat_meta_note or note != META_NOTE:  # a folder's summary line says it once
            print(f"  note: {note}")
    sys.stdout.flush()


def _mib(n: int) -> str:
    return f"{n / 2**30:.1f} GiB" if n >= 2**30 else f"{n / 2**20:.1f} MiB"


def _shapes(items: tuple[dict, ...]) -> str:
    return ", ".join(f"{d['dtype']}{d['shape']}" if "shape" in d else d.get("value", "?") for d in items)
