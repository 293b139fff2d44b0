"""`opforge task check TASK.py`: load a task, run its reference once per shape variant, show what goes in and out."""

from __future__ import annotations

import argparse
import json

from evaluator import TaskError, default_evaluator, load_task
from opforge.cli import UsageError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("task", help="work with task files", description="Work with task files.")
    tsub = p.add_subparsers(dest="task_command", metavar="ACTION")
    c = tsub.add_parser("check", help="load and validate a task, run its reference once",
                        description="Load and validate TASK.py in a separate process, run the reference once for "
                                    "the benchmark shape and every SHAPES variant, and print input and output shapes "
                                    "and dtypes. Exit status 2 with one sentence when the task is unusable.")
    c.add_argument("task", nargs="+", help="one or more task files")
    c.add_argument("--json", action="store_true", help="print one JSON object per task on stdout")
    c.add_argument("--meta", action="store_true",
                   help="run on PyTorch's meta device: shapes only, no memory or compute, instant for huge tasks")
    c.add_argument("--device", choices=("cpu", "cuda", "auto"), default="cpu", help="where to run the reference")
    c.set_defaults(run=run_check)
    p.set_defaults(run=lambda args: (p.print_help(), 2)[1])


def run_check(args: argparse.Namespace) -> int:
    failures = 0
    for path in args.task:
        try:
            task = load_task(path)
            report = default_evaluator().check_task(task, "meta" if args.meta else args.device)
        except TaskError as exc:
            if len(args.task) == 1:
                raise UsageError(str(exc)) from None
            print(f"opforge: {exc}")
            failures += 1
            continue
        if args.json:
            print(json.dumps({"task": path, "ok": True, "device": report.device, "variants": list(report.variants),
                              "inputs": [list(v) for v in report.inputs], "outputs": [list(v) for v in report.outputs],
                              "ops": list(report.ops)}))
            continue
        print(f"ok  {path}  ({len(report.variants)} shape variant(s), on {report.device})")
        for i, (over, ins, outs) in enumerate(zip(report.variants, report.inputs, report.outputs)):
            label = "benchmark shape" if i == 0 else "variant " + ", ".join(f"{k}={v}" for k, v in over.items())
            print(f"  {label}")
            print(f"    inputs : {_shapes(ins)}")
            print(f"    outputs: {_shapes(outs)}")
        if report.ops:
            print(f"  reference ops: {', '.join(report.ops)}")
    return 2 if failures else 0


def _shapes(items: tuple[dict, ...]) -> str:
    return ", ".join(f"{d['dtype']}{d['shape']}" if "shape" in d else d.get("value", "?") for d in items)
