"""`opforge export RUN_ID [RUN_ID ...] --out DIR`: the runs' best kernels as an installable package (docs/EXPORT.md)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from benchmarks import list_suites
from opforge.cli.flags import add_db_argument, open_store
from opforge.errors import UsageError
from opforge.display import format_speedup
from opforge.export import ExportError, check_name, export_package, suite_runs
from store import StoreError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("export", help="turn the best kernels of runs into a pip-installable package",
                       description="Write a Python package holding the fastest correct kernel of the given runs for "
                                   "each task and device: each as a torch.library custom op and a drop-in nn.Module "
                                   "(the reference's constructor and state-dict names) that falls back to the "
                                   "reference, with one warning, wherever the kernel was not verified; its own tests; "
                                   "a bench entry point; and manifest.json with the evidence. A kernel with a verdict "
                                   "other than ok on any device is refused.")
    p.add_argument("run_ids", type=int, nargs="*", metavar="RUN_ID", help="runs whose best kernels to export")
    p.add_argument("--out", required=True, metavar="DIR",
                   help="where to write the package: a new or empty directory, or an earlier export (replaced)")
    p.add_argument("--name", metavar="NAME",
                   help="the package's import name (default opforge_<task> for one task, else opforge_kernels)")
    p.add_argument("--min-speedup", type=float, metavar="X",
                   help="leave out kernels less than X times as fast as the reference (default: keep every correct "
                        "kernel)")
    p.add_argument("--suite", metavar="NAME",
                   help="instead of RUN_IDs: the runs of the leaderboard's top bench of this suite")
    p.add_argument("--agent", metavar="LABEL", help="with --suite: the bench of this agent label (every device)")
    add_db_argument(p)
    p.add_argument("--json", action="store_true", help="print one JSON object describing the package")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if args.suite is None and not args.run_ids:
        raise UsageError("Name the runs to export (RUN_ID ...; `opforge runs` lists them) or a suite with --suite.")
    if args.suite is not None and args.run_ids:
        raise UsageError("Give either RUN_IDs or --suite, not both.")
    if args.agent is not None and args.suite is None:
        raise UsageError("--agent picks a bench of a suite: give --suite NAME with it.")
    if args.min_speedup is not None and not args.min_speedup >= 0:
        raise UsageError(f"--min-speedup must be a non-negative number, not {args.min_speedup}.")
    try:
        if args.name is not None:
            check_name(args.name)
    except ExportError as exc:
        raise UsageError(str(exc)) from None
    store = open_store(args.db)
    notes: list[str] = []
    try:
        run_ids, source = list(args.run_ids), {}
        if args.suite is not None:
            suite = args.suite
            if suite not in list_suites() and Path(suite).expanduser().exists():
                suite = str(Path(suite).expanduser().resolve())
            run_ids, notes = suite_runs(store, suite, args.agent)
            source = {"suite": suite, "agent": args.agent}
        result = export_package(store, run_ids, Path(args.out), name=args.name, min_speedup=args.min_speedup,
                                source=source)
    except (ExportError, StoreError) as exc:
        raise UsageError(str(exc)) from None
    finally:
        store.close()
    for note in [*notes, *result.notes]:
        print(f"opforge: note: {note}", file=sys.stderr)
    if args.json:
        print(json.dumps(result.to_json()))
        return 0
    n = sum(len(op["kernels"]) for op in result.operators)
    print(f"exported {n} kernel{'s' if n != 1 else ''} of {len(result.operators)} operator"
          f"{'s' if len(result.operators) != 1 else ''} to {result.out} as package {result.package} "
          f"{result.version}")
    for op in result.operators:
        for k in op["kernels"]:
            print(f"  {op['class']:<20} {k['id']:<32} {format_speedup(k['speedup']):>8}  {k['device']}")
    print(f"install: pip install {result.out}   verify: python -m {result.package}.selftest   "
          f"re-measure: python -m {result.package}.bench")
    return 0
